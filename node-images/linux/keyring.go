package linux

import "embed"

// DebianKeyring holds, in keyring/, the armored public keys of the Debian
// archive that sign the node image's suite, as exported from
// debian-archive-keyring 2023.3+deb12u2. It is not part of Recipe, so it
// is not hashed into the image's cache key.
//
//go:embed keyring
var DebianKeyring embed.FS // Why: until the image is built from internal/debian, these keys change nothing in it.

// DebianKeys are the primary-key fingerprints an InRelease must be signed
// by: one good signature from one of them is enough, and a subkey's
// signature counts for its primary key.
var DebianKeys = []string{
	// Why: these are the keys that sign bookworm's InRelease: Debian signs
	// with the automatic keys of the current and the previous release, and
	// a stable suite also with its release key.

	// Debian Archive Automatic Signing Key (12/bookworm) <ftpmaster@debian.org>,
	// RSA 4096, expires 2031-01-19; signs with subkey 4CB50190207B4758A3F73A796ED0E7B82643E131.
	"B8B80B5B623EAB6AD8775C45B7C5D7D6350947F8",
	// Debian Archive Automatic Signing Key (13/trixie) <ftpmaster@debian.org>,
	// RSA 4096, expires 2035-03-28; signs with subkey B8E5F13176D2A7A75220028078DBA3BC47EF2265.
	"04B54C3CDCA79751B16BC6B5225629DF75B188BD",
	// Debian Stable Release Key (12/bookworm) <debian-release@lists.debian.org>,
	// ed25519, expires 2031-01-21; signs with the primary key.
	"4D64FEC119C2029067D6E791F8D2585B8783D481",
}
