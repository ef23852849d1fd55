// Package build builds hwk's node images into the cache pkg/nodeimage
// describes. Build makes the Linux image from the recipe in
// node-images/linux and images/: binaries from source or official
// releases, the container images every node carries, one Debian root
// configured in a stage-2 kernel, and from it every driver's format.
// BuildWindows installs the Windows image from the user's Windows Server
// ISO in a VM of a driver's Installer, provisioned by node-images/windows.
// A build with unchanged inputs is a cache lookup.
//
// Files: build.go (Build, Plan), recipe.go, debroot.go, rootfs.go,
// binaries.go, keys.go, oci.go (the Linux build), kernel.go and
// vmkernel.go (stage 2 in the Docker engine or a VM), formats.go (the
// formats and the manifest), windows.go, wininstall.go, winimages.go and
// windisks.go (the Windows build), watchdog.go (an install phase over its
// budget).
package build
