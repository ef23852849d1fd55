package debian_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/debian"
	"github.com/hwk-dev/hwk/internal/testing/debtest"
	"github.com/hwk-dev/hwk/node-images/linux"
)

// TestLiveDebian reads the real bookworm archive with the committed keys.
// It needs the network, so it runs only with HWK_DEBIAN_NET=1;
// HWK_DEBIAN_MIRROR picks another mirror than deb.debian.org.
func TestLiveDebian(t *testing.T) {
	if os.Getenv("HWK_DEBIAN_NET") != "1" {
		t.Skip("reads deb.debian.org: set HWK_DEBIAN_NET=1 to run it")
	}
	mirror := os.Getenv("HWK_DEBIAN_MIRROR")
	if mirror == "" {
		mirror = "http://deb.debian.org/debian"
	}
	v, err := debian.NewVerifier(realKeyring(t), linux.DebianKeys)
	if err != nil {
		t.Fatal(err)
	}
	tr := &timedTransport{base: http.DefaultTransport}
	a := &debian.Archive{Mirror: mirror, Suite: "bookworm", Verifier: v, HTTP: &http.Client{Transport: tr, Timeout: 5 * time.Minute}}
	ctx := context.Background()

	start := time.Now()
	rel, err := a.Release(ctx)
	if err != nil {
		t.Fatal(err)
	}
	relTime := time.Since(start)
	t.Logf("InRelease: %s, Suite %s, Version %s, Date %s, SHA-256 %s", rel.URL, rel.Suite, rel.Version, rel.Date.Format(time.RFC1123), rel.SHA256)
	for _, s := range rel.Signers {
		t.Logf("  signed by %s (key %s) %q at %s", s.Fingerprint, s.Key, s.Name, s.Created.Format(time.RFC3339))
	}
	if len(rel.Signers) == 0 || rel.Codename != "bookworm" {
		t.Errorf("signers %d, codename %q", len(rel.Signers), rel.Codename)
	}

	tr.reset()
	start = time.Now()
	idx, err := a.Packages(ctx, rel, "main", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	total := time.Since(start)
	download := tr.read()
	t.Logf("Packages: %s (%d bytes), %d packages", idx.URL, idx.File.Size, len(idx.Packages))
	t.Logf("times: InRelease fetch+verify+parse %v; Packages download %v; check, decompress and parse %v", relTime.Round(time.Millisecond), download.Round(time.Millisecond), (total - download).Round(time.Millisecond))
	if len(idx.Packages) < 50000 {
		t.Errorf("only %d packages in bookworm main", len(idx.Packages))
	}
	found := map[string]bool{}
	for _, p := range idx.Packages {
		if p.Package == "base-files" || p.Package == "systemd" || p.Package == "containerd" {
			found[p.Package] = true
		}
	}
	if len(found) != 3 {
		t.Errorf("base-files, systemd, containerd: found %v", found)
	}
	if dir := os.Getenv("HWK_DEBIAN_SAVE"); dir != "" {
		// Keeps the index for BenchmarkPackagesIndex (HWK_DEBIAN_PACKAGES).
		resp, err := http.Get(idx.URL)
		if err == nil {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			p := filepath.Join(dir, filepath.Base(idx.File.Path))
			t.Logf("saved %s: %v", p, os.WriteFile(p, data, 0o644))
		}
	}
}

// timedTransport adds up the time from each request until its body has
// been read to the end.
type timedTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	sum  time.Duration
}

func (t *timedTransport) reset() { t.mu.Lock(); t.sum = 0; t.mu.Unlock() }
func (t *timedTransport) read() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sum
}

func (t *timedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &timedBody{ReadCloser: resp.Body, done: func() {
		t.mu.Lock()
		t.sum += time.Since(start)
		t.mu.Unlock()
	}}
	return resp, nil
}

type timedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

// BenchmarkPackagesIndex decompresses and parses a Packages index: the
// real one if HWK_DEBIAN_PACKAGES names a saved Packages.xz or .gz (see
// TestLiveDebian's HWK_DEBIAN_SAVE), otherwise a made-up one of bookworm's
// size. It reports the fastest run beside Go's mean.
func BenchmarkPackagesIndex(b *testing.B) {
	// Why the fastest run: it is the figure to watch when the decoder
	// changes (ulikunitz/xz took 17.8 s on the real file, xi2/xz under
	// 1 s), which a timed test would only turn into a flaky one.
	var data []byte
	ext := ".xz"
	if p := os.Getenv("HWK_DEBIAN_PACKAGES"); p == "" {
		// 63,000 paragraphs, in a stored xz, so it measures the parsing.
		data = syntheticIndex(63000)
	} else {
		var err error
		if data, err = os.ReadFile(p); err != nil {
			b.Fatal(err)
		}
		ext = filepath.Ext(p)
		if ext != ".xz" && ext != ".gz" {
			ext = ""
		}
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	fastest, n := time.Duration(1<<63-1), 0
	for b.Loop() {
		start := time.Now()
		pkgs, err := debian.ParseIndex(bytes.NewReader(data), ext)
		if err != nil {
			b.Fatal(err)
		}
		fastest, n = min(fastest, time.Since(start)), len(pkgs)
	}
	b.ReportMetric(float64(n), "packages/op")
	b.ReportMetric(fastest.Seconds(), "fastest-s")
}

func syntheticIndex(n int) []byte {
	var b bytes.Buffer
	b.Grow(n * 1100)
	for i := range n {
		fmt.Fprintf(&b, `Package: pkg%[1]d
Source: src%[1]d (1.%[1]d-1)
Version: 1:%[1]d.2.3-4+deb12u1
Installed-Size: %[1]d
Maintainer: Someone <someone@example.invalid>
Architecture: amd64
Multi-Arch: same
Depends: libc6 (>= 2.34), libpkg%[1]d-1 (= 1:%[1]d.2.3-4+deb12u1), debconf (>= 0.5) | debconf-2.0
Pre-Depends: dpkg (>= 1.17.14)
Breaks: old%[1]d (<< 1.0)
Description: package number %[1]d
 A longer description of package %[1]d, over
 several lines, as the real index has.
 .
 And a second paragraph.
Homepage: https://example.invalid/%[1]d
Description-md5: 0123456789abcdef0123456789abcdef
Tag: role::program, implemented-in::c
Section: utils
Priority: optional
Filename: pool/main/p/pkg%[1]d/pkg%[1]d_%[1]d.2.3-4+deb12u1_amd64.deb
Size: %[1]d
MD5sum: 0123456789abcdef0123456789abcdef
SHA256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef

`, i)
	}
	return debtest.StoredXZ(b.Bytes())
}
