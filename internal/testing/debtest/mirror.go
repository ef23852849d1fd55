package debtest

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/debian"
)

// Faults make a Mirror misbehave the ways a real mirror (or someone
// between it and hwk) can.
type Faults struct {
	// Unsigned serves no InRelease, only the unsigned Release.
	Unsigned bool
	// PlainInRelease serves the unsigned Release text as InRelease.
	PlainInRelease bool
	// WrongSigner signs the InRelease with a key that is not among the
	// Mirror's Keys.
	WrongSigner bool
	// TamperInRelease changes one byte of the signed text after signing.
	TamperInRelease bool
	// PackagesMismatch serves Packages files whose bytes differ from
	// what the InRelease lists (same size, one byte changed).
	PackagesMismatch bool
	// BadDeb names a package whose .deb is served with one byte changed.
	BadDeb string
	// NoByHash leaves out Acquire-By-Hash and the by-hash/ files.
	NoByHash bool
}

// MirrorOptions describe the archive a Mirror serves: one suite, one
// component, one architecture.
type MirrorOptions struct {
	Suite, Codename string // bookworm and bookworm if empty
	Component, Arch string // main and amd64 if empty
	// Date is the Release's Date; an hour ago if zero. ValidUntil is left
	// out if zero, as Debian's stable suites do.
	Date, ValidUntil time.Time
	Debs             []Deb
	// Keys sign the InRelease; one new ed25519 key if nil.
	Keys   []*Key
	Faults Faults
}

// Mirror is an httptest server holding a Debian archive.
type Mirror struct {
	URL    string
	Suite  string
	Keys   []*Key
	Server *httptest.Server
	// Files are the archive's files by path under the root, as the
	// archive describes them (before any fault changes what is served).
	Files map[string][]byte
	// Debs are the built packages, by package name.
	Debs map[string][]byte

	served map[string][]byte
	mu     sync.Mutex
	log    []string
}

// NewMirror builds the archive and starts serving it; the server stops
// when the test ends.
func NewMirror(t testing.TB, o MirrorOptions) *Mirror {
	t.Helper()
	suite, codename := cmp(o.Suite, "bookworm"), cmp(o.Codename, cmp(o.Suite, "bookworm"))
	comp, arch := cmp(o.Component, "main"), cmp(o.Arch, "amd64")
	if o.Keys == nil {
		o.Keys = []*Key{NewKey(t, KeyOptions{EdDSA: true})}
	}
	if o.Date.IsZero() {
		o.Date = time.Now().Add(-time.Hour)
	}
	m := &Mirror{Suite: suite, Keys: o.Keys, Files: map[string][]byte{}, Debs: map[string][]byte{}}

	var packages bytes.Buffer
	for i, d := range o.Debs {
		data, err := d.Build()
		if err != nil {
			t.Fatalf("debtest: %v", err)
		}
		m.Debs[d.Package] = data
		m.Files[d.Filename()] = data
		if i > 0 {
			packages.WriteString("\n")
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&packages, "%sFilename: %s\nSize: %d\nSHA256: %s\n", d.Fields(), d.Filename(), len(data), hex.EncodeToString(sum[:]))
	}
	dir := comp + "/binary-" + arch + "/"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.ModTime = Epoch
	_, _ = zw.Write(packages.Bytes())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	indexes := map[string][]byte{
		dir + "Packages":    packages.Bytes(),
		dir + "Packages.gz": gz.Bytes(),
		dir + "Packages.xz": StoredXZ(packages.Bytes()),
	}

	rel := &strings.Builder{}
	fmt.Fprintf(rel, "Origin: Debian\nLabel: Debian\nSuite: %s\nCodename: %s\nDate: %s\n", suite, codename, o.Date.UTC().Format(time.RFC1123))
	if !o.ValidUntil.IsZero() {
		fmt.Fprintf(rel, "Valid-Until: %s\n", o.ValidUntil.UTC().Format(time.RFC1123))
	}
	if !o.Faults.NoByHash {
		rel.WriteString("Acquire-By-Hash: yes\n")
	}
	fmt.Fprintf(rel, "Architectures: %s\nComponents: %s\nDescription: hwk test archive\nSHA256:\n", arch, comp)
	dists := "dists/" + suite + "/"
	for _, p := range slices.Sorted(maps.Keys(indexes)) {
		data := indexes[p]
		sum := sha256.Sum256(data)
		fmt.Fprintf(rel, " %s %8d %s\n", hex.EncodeToString(sum[:]), len(data), p)
		m.Files[dists+p] = data
		if !o.Faults.NoByHash {
			m.Files[dists+path.Dir(p)+"/by-hash/SHA256/"+hex.EncodeToString(sum[:])] = data
		}
	}
	release := []byte(rel.String())
	m.Files[dists+"Release"] = release
	signers := o.Keys
	if o.Faults.WrongSigner {
		signers = []*Key{NewKey(t, KeyOptions{EdDSA: true, Name: "not a pinned key"})}
	}
	m.Files[dists+"InRelease"] = ClearSign(t, release, signers...)

	m.served = map[string][]byte{}
	for p, data := range m.Files {
		m.served[p] = data
	}
	if o.Faults.Unsigned {
		delete(m.served, dists+"InRelease")
	}
	if o.Faults.PlainInRelease {
		m.served[dists+"InRelease"] = release
	}
	if o.Faults.TamperInRelease {
		m.served[dists+"InRelease"] = bytes.Replace(m.Files[dists+"InRelease"], []byte("Label: Debian"), []byte("Label: Debiam"), 1)
	}
	if o.Faults.PackagesMismatch {
		for p, data := range m.served {
			if strings.HasPrefix(path.Base(p), "Packages") || strings.Contains(p, "/by-hash/") {
				m.served[p] = flipLast(data)
			}
		}
	}
	if o.Faults.BadDeb != "" {
		var found bool
		for _, d := range o.Debs {
			if d.Package == o.Faults.BadDeb {
				m.served[d.Filename()] = flipLast(m.Files[d.Filename()])
				found = true
			}
		}
		if !found {
			t.Fatalf("debtest: Faults.BadDeb names %q, which is not among the Debs", o.Faults.BadDeb)
		}
	}

	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Server.Close)
	m.URL = m.Server.URL + "/debian"
	return m
}

func flipLast(b []byte) []byte {
	out := bytes.Clone(b)
	out[len(out)-1] ^= 0xff
	return out
}

func (m *Mirror) serve(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.log = append(m.log, r.Method+" "+r.URL.Path)
	m.mu.Unlock()
	p, ok := strings.CutPrefix(r.URL.Path, "/debian/")
	data, found := m.served[p]
	if !ok || !found || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, path.Base(p), Epoch, bytes.NewReader(data))
}

// Requests returns the requests served so far, as "GET /debian/...".
func (m *Mirror) Requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.log)
}

// Fingerprints are the primary fingerprints of the Mirror's Keys: what to
// pin.
func (m *Mirror) Fingerprints() []string {
	var out []string
	for _, k := range m.Keys {
		out = append(out, k.Fingerprint())
	}
	return out
}

// Keyring is the public part of the Mirror's Keys.
func (m *Mirror) Keyring(t testing.TB) *debian.Keyring {
	t.Helper()
	var all []byte
	for _, k := range m.Keys {
		all = append(all, k.Public(t)...)
	}
	kr, err := debian.ReadKeyring(bytes.NewReader(all))
	if err != nil {
		t.Fatalf("debtest: reading the mirror's keys: %v", err)
	}
	return kr
}

// Archive is a debian.Archive for the Mirror's suite that pins the
// Mirror's Keys.
func (m *Mirror) Archive(t testing.TB) *debian.Archive {
	t.Helper()
	v, err := debian.NewVerifier(m.Keyring(t), m.Fingerprints())
	if err != nil {
		t.Fatalf("debtest: %v", err)
	}
	return &debian.Archive{Mirror: m.URL, Suite: m.Suite, Verifier: v, HTTP: m.Server.Client()}
}
