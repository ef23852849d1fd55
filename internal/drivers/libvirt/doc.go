// Package libvirt runs nodes as QEMU virtual machines through libvirt
// (digitalocean/go-libvirt, pure Go), with one NAT network per cluster and
// a copy-on-write disk per node over the cached node image.
//
// Files: driver.go (Options, New), preflight.go (Preflight, Emulated,
// CheckImage), accel.go (the KVM probe), network.go (the NAT network, its
// DHCP hosts, the host's routes), machine.go (domains: Create ... List),
// node.go (Node, HostEndpoint), connect.go (the connection), xml.go
// (network and domain XML), storage.go and base.go (the pool, node image
// bases), seed.go (cidata), files.go (a cluster's files), install.go
// (Installer), bootkernel.go (KernelBooter), errno_*.go.
package libvirt
