package debian

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"pault.ag/go/debian/control"
)

// maxInRelease bounds what is read of an InRelease before it is verified.
// bookworm's is 151 KB; no real one comes near this.
const maxInRelease = 32 << 20

// Archive is one suite of a Debian mirror, read through a Verifier.
type Archive struct {
	// Mirror is the archive's root URL, the one apt's sources.list
	// names, e.g. http://deb.debian.org/debian.
	Mirror string
	// Suite is the suite or codename under dists/, e.g. bookworm.
	Suite string
	// Verifier holds the pinned keys an InRelease must be signed by.
	Verifier *Verifier
	// HTTP does the requests; nil means http.DefaultClient.
	HTTP *http.Client
	// NotBefore, if set, refuses an InRelease whose Date is earlier: a
	// lock records the Date it was made from, and bookworm's InRelease has
	// no Valid-Until, so without this a mirror could serve an older (still
	// validly signed) InRelease and hold back security fixes.
	NotBefore time.Time
}

// File is one entry of an InRelease's SHA256 list.
type File struct {
	Path   string // relative to dists/SUITE, e.g. main/binary-amd64/Packages.xz
	Size   int64
	SHA256 string // lower-case hex
}

// Release is a verified InRelease.
type Release struct {
	// URL is where the InRelease was fetched from.
	URL string
	// SHA256 is the digest of the InRelease file as fetched, signatures
	// and all: what a lock records to say which archive state it was
	// made from.
	SHA256 string
	// Date is when the archive made this InRelease; ValidUntil is zero
	// when the InRelease has none (Debian's stable suites).
	Date, ValidUntil time.Time

	Origin, Label, Suite, Codename, Version string
	Architectures, Components               []string
	// AcquireByHash reports whether index files can also be fetched by digest,
	// under by-hash/SHA256/, which cannot change while being read.
	AcquireByHash bool

	// Signers are the pinned keys that signed it; a lock records the
	// first one's Fingerprint.
	Signers []Signer
	// Files is the SHA256 list, by path.
	Files map[string]File
}

// Index is a component's binary package index for one architecture.
type Index struct {
	Component, Arch string
	// URL is where it was fetched from, and File the InRelease entry it
	// was checked against (the compressed file).
	URL  string
	File File
	// Packages are the paragraphs, in the index's order.
	Packages []Package
}

func (a *Archive) client() *http.Client {
	if a.HTTP != nil {
		return a.HTTP
	}
	return http.DefaultClient
}

func (a *Archive) now() time.Time {
	if a.Verifier != nil && a.Verifier.Now != nil {
		return a.Verifier.Now()
	}
	return time.Now()
}

// distsURL returns the URL of p under dists/SUITE/.
func (a *Archive) distsURL(p string) string {
	return strings.TrimRight(a.Mirror, "/") + "/dists/" + a.Suite + "/" + p
}

// Release fetches, verifies and parses the suite's InRelease.
func (a *Archive) Release(ctx context.Context) (*Release, error) {
	if a.Verifier == nil {
		return nil, errors.New("debian.Archive has no Verifier: an archive is only read through pinned keys")
	}
	u := a.distsURL("InRelease")
	data, status, err := a.get(ctx, u, maxInRelease)
	if status == http.StatusNotFound {
		// A Release without InRelease is signed, if at all, by a detached
		// Release.gpg; apt still accepts that pair, hwk does not.
		if _, st, _ := a.get(ctx, a.distsURL("Release"), maxInRelease); st == http.StatusOK {
			return nil, fmt.Errorf("%s: not found, and the mirror serves only an unsigned or detached-signed Release: hwk needs the clearsigned InRelease; use a mirror that serves Debian's InRelease (such as http://deb.debian.org/debian)", u)
		}
		return nil, fmt.Errorf("%s: not found: check the mirror URL and that it carries the suite %q", u, a.Suite)
	}
	if err != nil {
		return nil, err
	}
	signed, err := a.Verifier.VerifyClearsigned(data)
	if err != nil {
		fix := "use a mirror that serves Debian's signed files unchanged, or pin the keys of the archive you mean to use"
		if errors.Is(err, ErrNotSigned) {
			fix = "the mirror serves an unsigned Release there: use a mirror that serves Debian's clearsigned InRelease"
		}
		return nil, fmt.Errorf("%s: %w: %s", u, err, fix)
	}
	sum := sha256.Sum256(data)
	rel, err := parseRelease(signed.Text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	rel.URL = u
	rel.SHA256 = hex.EncodeToString(sum[:])
	rel.Signers = signed.Signers
	// The names are signed, the URL is not: a mirror that answers for
	// bookworm with another suite's InRelease is caught here.
	if rel.Suite != a.Suite && rel.Codename != a.Suite {
		return nil, fmt.Errorf("%s: the InRelease is for suite %q (codename %q), not %q: the mirror serves the wrong file", u, rel.Suite, rel.Codename, a.Suite)
	}
	now := a.now()
	if !rel.ValidUntil.IsZero() && now.After(rel.ValidUntil) {
		return nil, fmt.Errorf("%s: the InRelease was valid until %s, and it is now %s: the mirror is out of date, use another (or check this machine's clock)", u, rel.ValidUntil.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if !a.NotBefore.IsZero() && rel.Date.Before(a.NotBefore) {
		return nil, fmt.Errorf("%s: the InRelease is dated %s, older than %s, the date it must not precede (the lock's): the mirror is out of date or replays an old InRelease; use another mirror", u, rel.Date.UTC().Format(time.RFC3339), a.NotBefore.UTC().Format(time.RFC3339))
	}
	return rel, nil
}

// parseRelease reads the fields of a verified InRelease text.
func parseRelease(text []byte) (*Release, error) {
	// control would take a nested clearsigned block as a document to
	// unwrap without any check; a verified InRelease never holds one.
	if bytes.HasPrefix(text, []byte("-----BEGIN PGP ")) {
		return nil, errors.New("the signed text is itself a PGP block, not a Release")
	}
	pr, err := control.NewParagraphReader(bytes.NewReader(text), nil)
	if err != nil {
		return nil, fmt.Errorf("reading the signed Release: %w", err)
	}
	p, err := pr.Next()
	if err != nil {
		return nil, fmt.Errorf("reading the signed Release: %w", err)
	}
	v := p.Values
	r := &Release{
		Origin:        v["Origin"],
		Label:         v["Label"],
		Suite:         v["Suite"],
		Codename:      v["Codename"],
		Version:       v["Version"],
		Architectures: strings.Fields(v["Architectures"]),
		Components:    strings.Fields(v["Components"]),
		AcquireByHash: strings.EqualFold(v["Acquire-By-Hash"], "yes"),
		Files:         map[string]File{},
	}
	if r.Date, err = parseDate(v["Date"]); err != nil {
		return nil, fmt.Errorf("the Release's Date: %w", err)
	}
	if s, ok := v["Valid-Until"]; ok {
		if r.ValidUntil, err = parseDate(s); err != nil {
			return nil, fmt.Errorf("the Release's Valid-Until: %w", err)
		}
	}
	for line := range strings.SplitSeq(v["SHA256"], "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("the Release's SHA256 list has a malformed line %q", line)
		}
		size, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("the Release's SHA256 list has a bad size in %q", line)
		}
		if !isSHA256(f[0]) {
			return nil, fmt.Errorf("the Release's SHA256 list has a bad digest in %q", line)
		}
		r.Files[f[2]] = File{Path: f[2], Size: size, SHA256: strings.ToLower(f[0])}
	}
	if len(r.Files) == 0 {
		return nil, errors.New("the Release has no SHA256 file list (hwk checks index files by SHA-256 only)")
	}
	return r, nil
}

func isSHA256(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && len(s) == 64
}

// parseDate reads a Release date. Debian writes RFC 1123 in UTC; other
// archive tools write a numeric zone or a one-digit day.
func parseDate(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC1123, time.RFC1123Z, "Mon, _2 Jan 2006 15:04:05 MST", "Mon, _2 Jan 2006 15:04:05 -0700"} {
		if t, err := time.Parse(layout, strings.TrimSpace(s)); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 1123 date", s)
}

// Packages fetches the binary package index of component for arch, checks
// it against rel's SHA256 list, and parses it. It prefers Packages.xz,
// then Packages.gz, then an uncompressed Packages, among the files rel
// lists, and moves on to the next only if the mirror does not have one.
func (a *Archive) Packages(ctx context.Context, rel *Release, component, arch string) (*Index, error) {
	base := component + "/binary-" + arch + "/Packages"
	var tried []string
	for _, ext := range []string{".xz", ".gz", ""} {
		f, ok := rel.Files[base+ext]
		if !ok {
			continue
		}
		u, data, err := a.fetchFile(ctx, rel, f)
		if errors.Is(err, errNotFound) {
			tried = append(tried, u)
			continue
		}
		if err != nil {
			return nil, err
		}
		pkgs, err := ParseIndex(bytes.NewReader(data), ext)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u, err)
		}
		return &Index{Component: component, Arch: arch, URL: u, File: f, Packages: pkgs}, nil
	}
	if len(tried) > 0 {
		return nil, fmt.Errorf("the mirror has none of the %s index files its InRelease lists (tried %s): the mirror is incomplete or mid-sync; retry later or use another mirror", base, strings.Join(tried, ", "))
	}
	return nil, fmt.Errorf("%s lists no %s{.xz,.gz}: check the component and architecture (the suite has components %s and architectures %s)", rel.URL, base, strings.Join(rel.Components, " "), strings.Join(rel.Architectures, " "))
}

var errNotFound = errors.New("not found")

// fetchFile fetches f and checks its size and SHA-256. It returns the URL
// the bytes came from.
func (a *Archive) fetchFile(ctx context.Context, rel *Release, f File) (string, []byte, error) {
	u := a.distsURL(f.Path)
	if rel.AcquireByHash {
		// A by-hash file never changes, so the mirror updating between the
		// InRelease and this request cannot give a mismatch.
		bu := a.distsURL(path.Dir(f.Path) + "/by-hash/SHA256/" + f.SHA256)
		data, status, err := a.get(ctx, bu, f.Size+1)
		if status != http.StatusNotFound {
			if err != nil {
				return bu, nil, err
			}
			return bu, data, checkFile(bu, f, data)
		}
	}
	data, status, err := a.get(ctx, u, f.Size+1)
	if status == http.StatusNotFound {
		return u, nil, errNotFound
	}
	if err != nil {
		return u, nil, err
	}
	return u, data, checkFile(u, f, data)
}

// checkFile compares data with what the InRelease lists for it.
func checkFile(u string, f File, data []byte) error {
	sum := sha256.Sum256(data)
	got := hex.EncodeToString(sum[:])
	if int64(len(data)) != f.Size || got != f.SHA256 {
		gotSize := strconv.Itoa(len(data))
		if int64(len(data)) > f.Size {
			gotSize = "more than " + strconv.FormatInt(f.Size, 10)
			got = "(not computed)"
		}
		return fmt.Errorf("%s does not match the signed InRelease: want %d bytes with SHA-256 %s, got %s bytes with SHA-256 %s: the mirror is mid-sync or serves altered files; retry later or use another mirror", u, f.Size, f.SHA256, gotSize, got)
	}
	return nil
}

// get fetches u, reading at most limit bytes of the body (one more than a
// known size, so that a longer body shows). The status is 0 if no answer
// came.
func (a *Archive) get(ctx context.Context, u string, limit int64) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", u, err)
	}
	resp, err := a.client().Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w: check the mirror URL and the network", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("GET %s: reading the body: %w", u, err)
	}
	return data, resp.StatusCode, nil
}
