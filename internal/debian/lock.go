package debian

// Lock pins a resolved package set: which archive state it was resolved
// against and, for each package, the exact file. A build from a lock asks
// the mirror for nothing except those files, each checked by SHA-256, so two
// builds from one lock install the same bytes whatever the mirror has
// published since; only making a new lock reads the index again.
type Lock struct {
	// Mirror, Suite, Component and Arch say where the index came from.
	Mirror    string `json:"mirror"`
	Suite     string `json:"suite"`
	Component string `json:"component"`
	Arch      string `json:"arch"`
	// InRelease is the signed file the index was checked against.
	InRelease LockedRelease `json:"inRelease"`
	// Requested are the packages asked for by name (besides the base set
	// every Debian root needs), sorted: what a relock resolves again.
	Requested []string `json:"requested"`
	// Packages are every package to install, in the order they are
	// unpacked: a package comes after those it pre-depends and depends on
	// where the graph allows, ties broken by name, so that the order, like
	// the set, is the same on every host.
	Packages []LockedPackage `json:"packages"`
}

// LockedRelease is the InRelease a lock was made from.
type LockedRelease struct {
	// SHA256 is the digest of the InRelease file, signatures and all.
	SHA256 string `json:"sha256"`
	// Date is the InRelease's Date, RFC 3339: a later build refuses an
	// older InRelease than this (Archive.NotBefore).
	Date string `json:"date"`
	// Signer is the primary fingerprint of the first pinned key that
	// signed it.
	Signer string `json:"signer"`
}

// LockedPackage is one package of a lock: what a build fetches and checks.
type LockedPackage struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	Architecture string `json:"architecture"`
	// MultiArch is the package's Multi-Arch field: "same" packages keep
	// their dpkg database files under NAME:ARCH.
	MultiArch string `json:"multiArch,omitempty"`
	// Filename is the .deb's path under the mirror root; Size and SHA256
	// are the index's for it.
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
}
