package download

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"path"
	"strings"
)

// Checksum is an expected digest: Algo is "sha256" or "sha512", Hex the
// lowercase hex digest.
type Checksum struct{ Algo, Hex string }

// String returns the digest as "sha256:abcd...".
func (c Checksum) String() string { return c.Algo + ":" + c.Hex }

// hexLen returns the length of a hex digest for algo, or 0 for an algorithm
// it does not know.
func hexLen(algo string) int {
	switch algo {
	case "sha256":
		return 2 * sha256.Size
	case "sha512":
		return 2 * sha512.Size
	}
	return 0
}

func newHash(algo string) hash.Hash {
	if algo == "sha512" {
		return sha512.New()
	}
	return sha256.New()
}

// normalize checks that c names a known algorithm and a well-formed digest
// of the right length, and lowercases the digest. The digest becomes a file
// name in the cache, so anything except hex digits must be refused here.
func (c Checksum) normalize() (Checksum, error) {
	n := hexLen(c.Algo)
	if n == 0 {
		return c, fmt.Errorf("unsupported checksum algorithm %q (want sha256 or sha512)", c.Algo)
	}
	if len(c.Hex) != n {
		return c, fmt.Errorf("%s digest %q has %d hex digits, want %d", c.Algo, c.Hex, len(c.Hex), n)
	}
	if _, err := hex.DecodeString(c.Hex); err != nil {
		return c, fmt.Errorf("%s digest %q is not hex", c.Algo, c.Hex)
	}
	c.Hex = strings.ToLower(c.Hex)
	return c, nil
}

// algoFromName maps a checksum file's name to the algorithm it holds, by
// its suffix, the only hint the release sites give.
func algoFromName(name string) (string, error) {
	for _, algo := range []string{"sha256", "sha512"} {
		if strings.HasSuffix(name, "."+algo) || strings.HasSuffix(name, "."+algo+"sum") {
			return algo, nil
		}
	}
	return "", fmt.Errorf("cannot tell the algorithm of checksum file %s: want a .sha256, .sha256sum, .sha512 or .sha512sum suffix", name)
}

// ParseChecksumFile reads a published checksum file and returns the
// digest, of algorithm algo, for the artifact named name. It accepts a bare
// digest (dl.k8s.io's "kubeadm.sha256"), and sha256sum-style lines,
// "hex  filename" or "hex *filename", one or several; a filename with a
// directory ("./bin/x", "dist/x") matches on its base name.
func ParseChecksumFile(data []byte, algo, name string) (Checksum, error) {
	return parseChecksumFile(data, algo, name, "checksum file")
}

// parseChecksumFile does ParseChecksumFile's work; file names the checksum
// file in errors.
func parseChecksumFile(data []byte, algo, name, file string) (Checksum, error) {
	if hexLen(algo) == 0 {
		return Checksum{}, fmt.Errorf("%s: unsupported checksum algorithm %q (want sha256 or sha512)", file, algo)
	}
	type entry struct {
		line      int
		hex, file string
	}
	var entries []entry
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// sha256sum writes "hex  file" in text mode and "hex *file" in
		// binary mode; any run of blanks will do as the separator.
		digest, artifact := line, ""
		if j := strings.IndexAny(line, " \t"); j >= 0 {
			digest = line[:j]
			artifact = strings.TrimPrefix(strings.TrimSpace(line[j:]), "*")
		}
		entries = append(entries, entry{line: i + 1, hex: digest, file: artifact})
	}

	var found []entry
	switch {
	case len(entries) == 0:
		return Checksum{}, fmt.Errorf("%s is empty", file)
	case len(entries) == 1 && entries[0].file == "":
		// A bare digest is for whatever artifact the file was published
		// beside; there is no name to check.
		found = entries
	default:
		for _, e := range entries {
			if e.file == "" {
				return Checksum{}, fmt.Errorf("%s line %d: digest without a file name among several entries", file, e.line)
			}
			if path.Base(strings.ReplaceAll(e.file, `\`, "/")) == name {
				found = append(found, e)
			}
		}
	}
	if len(found) == 0 {
		var names []string
		for i, e := range entries {
			if i == 8 {
				names = append(names, "...")
				break
			}
			names = append(names, e.file)
		}
		return Checksum{}, fmt.Errorf("no entry for %q in %s (entries: %s)", name, file, strings.Join(names, ", "))
	}
	sum, err := Checksum{Algo: algo, Hex: found[0].hex}.normalize()
	if err != nil {
		return Checksum{}, fmt.Errorf("%s line %d: %w", file, found[0].line, err)
	}
	for _, e := range found[1:] {
		if !strings.EqualFold(e.hex, sum.Hex) {
			return Checksum{}, fmt.Errorf("%s: conflicting entries for %q on lines %d and %d", file, name, found[0].line, e.line)
		}
	}
	return sum, nil
}
