// Package debian reads a Debian archive the way apt does, in Go and on any
// OS: it fetches a suite's InRelease, checks its OpenPGP signatures against
// a pinned set of archive keys, and fetches and parses a component's
// Packages index, checked against the sizes and SHA-256 digests the signed
// InRelease lists. It is the first step of building the Linux node image's
// Debian root without debootstrap (which needs root and a Linux host): what
// it returns is what a resolver and a lock need.
//
// Signatures are checked with github.com/ProtonMail/go-crypto, not with
// pault.ag/go/debian's control package: that one uses the frozen
// golang.org/x/crypto/openpgp, which cannot verify Debian's EdDSA release
// key. control only ever parses text this package has already verified (or
// whose digest it has checked), and is never given a keyring.
package debian
