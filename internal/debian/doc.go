// Package debian reads a Debian archive the way apt does, in Go and on any
// OS, to build the Linux node image's Debian root without debootstrap (which
// needs root and a Linux host). It checks a suite's InRelease against pinned
// archive keys (see Keyring) and a component's Packages index against the
// sizes and SHA-256 digests InRelease lists, for a resolver and a lock.
//
// Fetch then downloads a Lock's .debs, and Assemble writes them as one tar
// stream of a "stage-1" root, every package unpacked and none configured.
// Stage 2 is one `dpkg --configure -a` inside a Linux kernel (an
// unprivileged container is enough).
package debian
