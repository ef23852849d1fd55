package debian_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/debian"
	"github.com/hwk-dev/hwk/internal/testing/debtest"
	"github.com/hwk-dev/hwk/node-images/linux"
)

// testDebs is a small archive: an essential package, one with relations,
// and a Multi-Arch library.
var testDebs = []debtest.Deb{
	{Package: "base-files", Version: "12.4+deb12u15", Priority: "required", Essential: true,
		Files: []debtest.File{{Path: "/etc/debian_version", Body: "12.15\n"}}},
	{Package: "usr-is-merged", Version: "37~deb12u1", Architecture: "all", MultiArch: "foreign", Priority: "required",
		PreDepends: "init-system-helpers (>= 1.60)", Conflicts: "usrmerge", Provides: "usrmerge-done (= 1)"},
	{Package: "libc6", Version: "2.36-9+deb12u13", MultiArch: "same", Priority: "optional",
		Depends: "libgcc-s1", Breaks: "hurd (<< 1:0.9.git20220301-2)", Replaces: "libc6-amd64",
		Compression: "gz",
		Files:       []debtest.File{{Path: "/usr/lib/x86_64-linux-gnu/libc.so.6", Mode: 0o755, Body: "\x7fELF"}}},
}

func TestInReleaseGood(t *testing.T) {
	m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs, Date: time.Date(2026, 7, 11, 10, 16, 37, 0, time.UTC)})
	a := m.Archive(t)
	rel, err := a.Release(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(m.Files["dists/bookworm/InRelease"])
	if rel.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("SHA256 = %s, want the InRelease's %x", rel.SHA256, sum)
	}
	if rel.Suite != "bookworm" || rel.Codename != "bookworm" || rel.Origin != "Debian" {
		t.Errorf("Suite, Codename, Origin = %q, %q, %q", rel.Suite, rel.Codename, rel.Origin)
	}
	if want := time.Date(2026, 7, 11, 10, 16, 37, 0, time.UTC); !rel.Date.Equal(want) {
		t.Errorf("Date = %v, want %v", rel.Date, want)
	}
	if len(rel.Signers) != 1 || rel.Signers[0].Fingerprint != m.Keys[0].Fingerprint() {
		t.Errorf("Signers = %+v, want the mirror's key %s", rel.Signers, m.Keys[0].Fingerprint())
	}
	if !rel.AcquireByHash || !slices.Equal(rel.Components, []string{"main"}) || !slices.Equal(rel.Architectures, []string{"amd64"}) {
		t.Errorf("AcquireByHash, Components, Architectures = %v, %v, %v", rel.AcquireByHash, rel.Components, rel.Architectures)
	}
	if f := rel.Files["main/binary-amd64/Packages.xz"]; f.Size != int64(len(m.Files["dists/bookworm/main/binary-amd64/Packages.xz"])) {
		t.Errorf("Packages.xz entry = %+v", f)
	}

	idx, err := a.Packages(context.Background(), rel, "main", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(idx.URL, "/dists/bookworm/main/binary-amd64/by-hash/SHA256/") || idx.File.Path != "main/binary-amd64/Packages.xz" {
		t.Errorf("fetched %s (%s); want Packages.xz by hash", idx.URL, idx.File.Path)
	}
	if len(idx.Packages) != len(testDebs) {
		t.Fatalf("%d packages, want %d", len(idx.Packages), len(testDebs))
	}
	for i, d := range testDebs {
		p := idx.Packages[i]
		sum := sha256.Sum256(m.Debs[d.Package])
		arch := d.Architecture
		if arch == "" {
			arch = "amd64"
		}
		want := debian.Package{
			Package: d.Package, Architecture: arch, MultiArch: d.MultiArch, Priority: d.Priority, Essential: d.Essential,
			Depends: d.Depends, PreDepends: d.PreDepends, Provides: d.Provides, Conflicts: d.Conflicts, Breaks: d.Breaks, Replaces: d.Replaces,
			Filename: d.Filename(), Size: int64(len(m.Debs[d.Package])), SHA256: hex.EncodeToString(sum[:]),
		}
		want.Version = p.Version
		if p != want {
			t.Errorf("package %d:\n got %+v\nwant %+v", i, p, want)
		}
		if p.Version.String() != d.Version {
			t.Errorf("%s: Version %s, want %s", d.Package, p.Version, d.Version)
		}
	}
}

func TestPackagesWithoutByHash(t *testing.T) {
	m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs, Faults: debtest.Faults{NoByHash: true}})
	a := m.Archive(t)
	rel, err := a.Release(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	idx, err := a.Packages(context.Background(), rel, "main", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(idx.URL, "/debian/dists/bookworm/main/binary-amd64/Packages.xz") || len(idx.Packages) != len(testDebs) {
		t.Errorf("fetched %s, %d packages", idx.URL, len(idx.Packages))
	}
}

// releaseErr fetches the mirror's InRelease through a and wants an error.
func releaseErr(t *testing.T, a *debian.Archive) error {
	t.Helper()
	rel, err := a.Release(context.Background())
	if err == nil {
		t.Fatalf("Release accepted (signers %+v)", rel.Signers)
	}
	t.Log(err)
	return err
}

func wantIn(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("the error does not say %q:\n%v", p, err)
		}
	}
}

func TestInReleaseBadSignature(t *testing.T) {
	m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs, Faults: debtest.Faults{TamperInRelease: true}})
	err := releaseErr(t, m.Archive(t))
	if !errors.Is(err, debian.ErrUntrusted) {
		t.Errorf("error is not ErrUntrusted: %v", err)
	}
	wantIn(t, err, m.URL+"/dists/bookworm/InRelease", "not signed by a pinned Debian key", "bad signature by "+m.Keys[0].Fingerprint(), "use a mirror that serves Debian's signed files")
}

func TestInReleaseUnknownSigner(t *testing.T) {
	m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs, Faults: debtest.Faults{WrongSigner: true}})
	err := releaseErr(t, m.Archive(t))
	if !errors.Is(err, debian.ErrUntrusted) {
		t.Errorf("error is not ErrUntrusted: %v", err)
	}
	wantIn(t, err, m.URL, "not signed by a pinned Debian key", "which is not a pinned key")
}

// TestInReleaseSubkeyAndEdDSA signs as Debian does: an RSA key through its
// signing subkey, and an ed25519 key with its primary key.
func TestInReleaseSubkeyAndEdDSA(t *testing.T) {
	rsa := debtest.NewKey(t, debtest.KeyOptions{Name: "automatic", SigningSubkey: true})
	ed := debtest.NewKey(t, debtest.KeyOptions{Name: "stable", EdDSA: true})
	m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs, Keys: []*debtest.Key{rsa, ed}})
	rel, err := m.Archive(t).Release(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []debian.Signer{
		{Fingerprint: rsa.Fingerprint(), Key: rsa.SigningFingerprint(), Name: "automatic <test@example.invalid>"},
		{Fingerprint: ed.Fingerprint(), Key: ed.Fingerprint(), Name: "stable <test@example.invalid>"},
	}
	if len(rel.Signers) != 2 {
		t.Fatalf("Signers = %+v, want 2", rel.Signers)
	}
	if rsa.Fingerprint() == rsa.SigningFingerprint() {
		t.Fatal("the RSA key signs with its primary key; the test needs a subkey")
	}
	for i := range want {
		got := rel.Signers[i]
		got.Created = time.Time{}
		if got != want[i] {
			t.Errorf("signer %d = %+v, want %+v", i, got, want[i])
		}
	}

	// One good pinned signature is enough: the other signer is just
	// not trusted.
	for _, k := range []*debtest.Key{rsa, ed} {
		kr, err := debian.ReadKeyring(bytes.NewReader(k.Public(t)))
		if err != nil {
			t.Fatal(err)
		}
		v, err := debian.NewVerifier(kr, []string{k.Fingerprint()})
		if err != nil {
			t.Fatal(err)
		}
		s, err := v.VerifyClearsigned(m.Files["dists/bookworm/InRelease"])
		if err != nil {
			t.Errorf("pinning only %s: %v", k.Fingerprint(), err)
		} else if len(s.Signers) != 1 || s.Signers[0].Fingerprint != k.Fingerprint() {
			t.Errorf("pinning only %s: signers %+v", k.Fingerprint(), s.Signers)
		}
	}

	// A subkey's fingerprint is not a pin: only primary keys are.
	if _, err := debian.NewVerifier(m.Keyring(t), []string{rsa.SigningFingerprint()}); err == nil {
		t.Error("a verifier pinned a subkey's fingerprint")
	} else {
		wantIn(t, err, "no key with the pinned fingerprint "+rsa.SigningFingerprint())
	}
}

func TestInReleaseExpiredKey(t *testing.T) {
	k := debtest.NewKey(t, debtest.KeyOptions{EdDSA: true, Lifetime: time.Hour})
	m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs, Keys: []*debtest.Key{k}})
	a := m.Archive(t)
	if _, err := a.Release(context.Background()); err != nil {
		t.Fatalf("while the key is valid: %v", err)
	}
	a.Verifier.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	err := releaseErr(t, a)
	wantIn(t, err, "not signed by a pinned Debian key", "whose key has expired", "update the pinned keyring")
}

func TestInReleaseRevokedKey(t *testing.T) {
	k := debtest.NewKey(t, debtest.KeyOptions{EdDSA: true})
	m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs, Keys: []*debtest.Key{k}})
	k.Revoke(t)
	err := releaseErr(t, m.Archive(t))
	wantIn(t, err, "not signed by a pinned Debian key", "whose key is revoked")
}

func TestInReleaseFromTheFuture(t *testing.T) {
	m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs})
	a := m.Archive(t)
	a.Verifier.Now = func() time.Time { return time.Now().Add(-24 * time.Hour) }
	err := releaseErr(t, a)
	wantIn(t, err, "after this machine's clock", "check the clock")
}

func TestPackagesHashMismatch(t *testing.T) {
	for _, byHash := range []bool{true, false} {
		m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs, Faults: debtest.Faults{PackagesMismatch: true, NoByHash: !byHash}})
		a := m.Archive(t)
		rel, err := a.Release(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Packages(context.Background(), rel, "main", "amd64")
		if err == nil {
			t.Fatalf("by-hash %v: a Packages file that differs from the InRelease was accepted", byHash)
		}
		t.Log(err)
		f := rel.Files["main/binary-amd64/Packages.xz"]
		served := bytes.Clone(m.Files["dists/bookworm/main/binary-amd64/Packages.xz"])
		served[len(served)-1] ^= 0xff // what PackagesMismatch serves
		got := sha256.Sum256(served)
		u := m.URL + "/dists/bookworm/main/binary-amd64/Packages.xz"
		if byHash {
			u = m.URL + "/dists/bookworm/main/binary-amd64/by-hash/SHA256/" + f.SHA256
		}
		wantIn(t, err, u+" does not match the signed InRelease", "want ", f.SHA256, "got ", hex.EncodeToString(got[:]), "retry later or use another mirror")
	}
}

func TestReleaseWithoutSignatureRefused(t *testing.T) {
	t.Run("no InRelease", func(t *testing.T) {
		m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs, Faults: debtest.Faults{Unsigned: true}})
		err := releaseErr(t, m.Archive(t))
		wantIn(t, err, m.URL+"/dists/bookworm/InRelease: not found", "only an unsigned or detached-signed Release", "needs the clearsigned InRelease")
	})
	t.Run("InRelease not signed", func(t *testing.T) {
		m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs, Faults: debtest.Faults{PlainInRelease: true}})
		err := releaseErr(t, m.Archive(t))
		if !errors.Is(err, debian.ErrNotSigned) {
			t.Errorf("error is not ErrNotSigned: %v", err)
		}
		wantIn(t, err, m.URL+"/dists/bookworm/InRelease", "not an OpenPGP clearsigned file", "serves an unsigned Release")
	})
	t.Run("no suite", func(t *testing.T) {
		m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs})
		a := m.Archive(t)
		a.Suite = "trixie"
		err := releaseErr(t, a)
		wantIn(t, err, "/dists/trixie/InRelease: not found", "carries the suite \"trixie\"")
	})
}

// TestUnpinnedKeyRefused checks that a file signed only by a key that is in
// the keyring but not pinned is refused, naming that key: a keyring file may
// hold more keys than are pinned (Debian's holds every release's).
func TestUnpinnedKeyRefused(t *testing.T) {
	pinned := debtest.NewKey(t, debtest.KeyOptions{EdDSA: true})
	other := debtest.NewKey(t, debtest.KeyOptions{EdDSA: true})
	kr, err := debian.ReadKeyring(bytes.NewReader(append(pinned.Public(t), other.Public(t)...)))
	if err != nil {
		t.Fatal(err)
	}
	if got := kr.Fingerprints(); len(got) != 2 {
		t.Fatalf("the keyring has %v, want both keys", got)
	}
	v, err := debian.NewVerifier(kr, []string{pinned.Fingerprint()})
	if err != nil {
		t.Fatal(err)
	}
	text := []byte("Origin: Debian\nSuite: bookworm\n")
	if _, err := v.VerifyClearsigned(debtest.ClearSign(t, text, pinned)); err != nil {
		t.Fatalf("signed by the pinned key: %v", err)
	}
	_, err = v.VerifyClearsigned(debtest.ClearSign(t, text, other))
	if !errors.Is(err, debian.ErrUntrusted) {
		t.Fatalf("signed by a key in the keyring that is not pinned: err = %v, want ErrUntrusted", err)
	}
	wantIn(t, err, "signature by "+other.Fingerprint()+", which is not a pinned key")
}

// TestUnsignedTextRefused checks that a file with text before or after the
// signed block, which the signature does not cover, is refused.
func TestUnsignedTextRefused(t *testing.T) {
	k := debtest.NewKey(t, debtest.KeyOptions{EdDSA: true})
	kr, err := debian.ReadKeyring(bytes.NewReader(k.Public(t)))
	if err != nil {
		t.Fatal(err)
	}
	v, err := debian.NewVerifier(kr, []string{k.Fingerprint()})
	if err != nil {
		t.Fatal(err)
	}
	signed := debtest.ClearSign(t, []byte("Origin: Debian\nSuite: bookworm\n"), k)
	if s, err := v.VerifyClearsigned(signed); err != nil || string(s.Text) != "Origin: Debian\nSuite: bookworm\n" {
		t.Fatalf("the good file: %q, %v", s, err)
	}
	for name, data := range map[string][]byte{
		"after":  append(bytes.Clone(signed), "\nSHA256:\n 00 1 main/evil\n"...),
		"before": append([]byte("Suite: evil\n\n"), signed...),
	} {
		_, err := v.VerifyClearsigned(data)
		if !errors.Is(err, debian.ErrNotSigned) {
			t.Errorf("unsigned text %s the signature: %v", name, err)
		}
	}
}

func TestReleaseDates(t *testing.T) {
	date := time.Now().Add(-time.Hour).Truncate(time.Second)
	m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs, Date: date, ValidUntil: date.Add(30 * time.Minute)})
	a := m.Archive(t)
	err := releaseErr(t, a)
	wantIn(t, err, "the InRelease was valid until", "the mirror is out of date")

	m = debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs, Date: date})
	a = m.Archive(t)
	a.NotBefore = date.Add(time.Second)
	err = releaseErr(t, a)
	wantIn(t, err, "older than", "replays an old InRelease")
	a.NotBefore = date
	if _, err := a.Release(context.Background()); err != nil {
		t.Errorf("an InRelease as new as NotBefore: %v", err)
	}
}

func TestPackagesUnknownComponent(t *testing.T) {
	m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: testDebs})
	a := m.Archive(t)
	rel, err := a.Release(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Packages(context.Background(), rel, "main", "arm64")
	if err == nil {
		t.Fatal("an index the InRelease does not list was fetched")
	}
	wantIn(t, err, "lists no main/binary-arm64/Packages", "architectures amd64")
}

func TestParseIndexRefuses(t *testing.T) {
	good := "Package: a\nVersion: 1.0\nArchitecture: amd64\nFilename: pool/main/a/a/a_1.0_amd64.deb\nSize: 10\nSHA256: " + strings.Repeat("ab", 32) + "\n"
	if p, err := debian.ParseIndex(strings.NewReader(good), ""); err != nil || len(p) != 1 {
		t.Fatalf("the good index: %v, %v", p, err)
	}
	for name, c := range map[string]struct{ old, new, want string }{
		"filename escapes":  {"pool/main/a/a/a_1.0_amd64.deb", "../../etc/passwd", "bad Filename"},
		"absolute filename": {"pool/main/a/a/a_1.0_amd64.deb", "/etc/passwd", "bad Filename"},
		"no SHA-256":        {"SHA256: " + strings.Repeat("ab", 32), "MD5sum: 00", "bad SHA256"},
		"bad size":          {"Size: 10", "Size: -1", "bad Size"},
		"bad version":       {"Version: 1.0", "Version: ", "Version"},
		"not a field":       {"Package: a", "-----BEGIN PGP SIGNED MESSAGE-----\nPackage: a", "is not a field"},
	} {
		_, err := debian.ParseIndex(strings.NewReader(strings.Replace(good, c.old, c.new, 1)), "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

// realKeyring returns the keyring committed in node-images/linux.
func realKeyring(t testing.TB) *debian.Keyring {
	t.Helper()
	kr, err := debian.ReadKeyringFS(linux.DebianKeyring, "keyring")
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func TestRealKeyringParses(t *testing.T) {
	kr := realKeyring(t)
	got := kr.Fingerprints()
	want := slices.Sorted(slices.Values(linux.DebianKeys))
	if !slices.Equal(got, want) {
		t.Errorf("the committed keyring has the keys\n%s\nthe pins are\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := debian.NewVerifier(kr, linux.DebianKeys); err != nil {
		t.Error(err)
	}
}

// TestRealInRelease verifies bookworm's InRelease of 2026-07-11 (saved in
// testdata) with the committed keys: two RSA subkey signatures and one
// EdDSA signature, as Debian makes them.
func TestRealInRelease(t *testing.T) {
	f, err := os.Open("testdata/bookworm-InRelease.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	v, err := debian.NewVerifier(realKeyring(t), linux.DebianKeys)
	if err != nil {
		t.Fatal(err)
	}
	// The keys are judged at a fixed time, so that the test outlives
	// them (2031).
	v.Now = func() time.Time { return time.Date(2026, 7, 12, 0, 0, 0, 0, time.UTC) }
	s, err := v.VerifyClearsigned(data)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sg := range s.Signers {
		got = append(got, sg.Fingerprint+" "+sg.Key)
	}
	want := []string{
		"B8B80B5B623EAB6AD8775C45B7C5D7D6350947F8 4CB50190207B4758A3F73A796ED0E7B82643E131",
		"04B54C3CDCA79751B16BC6B5225629DF75B188BD B8E5F13176D2A7A75220028078DBA3BC47EF2265",
		"4D64FEC119C2029067D6E791F8D2585B8783D481 4D64FEC119C2029067D6E791F8D2585B8783D481",
	}
	if !slices.Equal(got, want) {
		t.Errorf("signers (primary, signing key):\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// One changed byte of the signed text breaks all three.
	bad := bytes.Replace(data, []byte("Version: 12.15"), []byte("Version: 12.16"), 1)
	_, err = v.VerifyClearsigned(bad)
	if !errors.Is(err, debian.ErrUntrusted) || strings.Count(err.Error(), "bad signature by") != 3 {
		t.Errorf("a changed InRelease: %v", err)
	}
}

// TestParseIndexFolds checks that a folded field reads as one line,
// whitespace-only lines end a paragraph, and fields nobody keeps are
// skipped.
func TestParseIndexFolds(t *testing.T) {
	sum := strings.Repeat("cd", 32)
	index := "Package: a\nVersion: 1\nArchitecture: all\nDepends: b,\n c (>= 2)\nDescription: x\n long\n .\n text\nFilename: pool/a.deb\nSize: 1\nSHA256: " + sum + "\n \t\n" +
		"Package: b\nVersion: 2\nFilename: pool/b.deb\nSize: 2\nSHA256: " + sum
	got, err := debian.ParseIndex(strings.NewReader(index), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Depends != "b, c (>= 2)" || got[1].Package != "b" || got[1].Size != 2 {
		t.Errorf("parsed %+v", got)
	}
	if _, err := debian.ParseIndex(strings.NewReader(index+"\nPackage: c\nPackage: c\n"), ""); err == nil || !strings.Contains(err.Error(), "field Package twice") {
		t.Errorf("a field twice: %v", err)
	}
}
