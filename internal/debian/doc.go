// Package debian reads a Debian archive the way apt does, in Go and on any
// OS: it fetches a suite's InRelease, checks its OpenPGP signatures against
// a pinned set of archive keys, and fetches and parses a component's
// Packages index, checked against the sizes and SHA-256 digests the signed
// InRelease lists. It is the first step of building the Linux node image's
// Debian root without debootstrap (which needs root and a Linux host): what
// it returns is what a resolver and a lock need.
//
// Fetch then downloads a Lock's .debs, and Assemble writes them as one tar
// stream of a "stage-1" root: every package unpacked as `dpkg --unpack`
// leaves it, none configured. Stage 2 is one `dpkg --configure -a` inside
// a Linux kernel (an unprivileged container is enough). What stage 1 does
// in place of the scripts dpkg --configure -a does not run (preinst):
// /etc/passwd and /etc/group are seeded from base-passwd's masters (its
// preinst's job). The other preinsts of the node's package set do nothing
// on a first install (dpkg-maintscript-helper steps for upgrades, checks),
// except linux-image-*'s, which flags a first install for its postinst
// (linux-update-symlinks install rather than upgrade): with no earlier
// links the result is the same, /vmlinuz, /initrd.img and their .old
// links, with or without running every preinst first (checked by
// TestStage1ConfiguresInDocker, HWK_STAGE1_PREINST=1).
//
// Signatures are checked with github.com/ProtonMail/go-crypto, not with
// pault.ag/go/debian's control package: that one uses the frozen
// golang.org/x/crypto/openpgp, which cannot verify Debian's EdDSA release
// key. control only ever parses text this package has already verified (or
// whose digest it has checked), and is never given a keyring.
package debian
