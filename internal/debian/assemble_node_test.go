package debian

import (
	"archive/tar"
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNodeSetEachPathOnce checks that the node image's real package set
// (node-images/linux/debian.lock.yaml), assembled from the .debs in the
// download cache HWK_STAGE1_CACHE, has each path once, as the raw-disk
// writer needs. It is skipped without HWK_STAGE1_CACHE, and fails when a
// .deb of the lock is not there.
func TestNodeSetEachPathOnce(t *testing.T) {
	// Why opt-in: it reads only the cache (CACHE/sha256/DIGEST, as
	// TestStage1ConfiguresInDocker fills it), never the network; make
	// node-image-test sets it to the node image build's Debian cache.
	cache := os.Getenv("HWK_STAGE1_CACHE")
	if cache == "" {
		t.Skip("needs the node set's .debs: set HWK_STAGE1_CACHE to a download cache holding them")
	}
	lockFile := filepath.Join("..", "..", "node-images", "linux", "debian.lock.yaml")
	lf, err := os.Open(lockFile)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := ReadLock(lf)
	lf.Close()
	if err != nil {
		t.Fatalf("%s: %v", lockFile, err)
	}
	debs := make([]Deb, len(lock.Packages))
	for i, p := range lock.Packages {
		debs[i] = Deb{Package: p, Path: filepath.Join(cache, "sha256", strings.ToLower(p.SHA256))}
		if _, err := os.Stat(debs[i].Path); err != nil {
			t.Fatalf("package %s %s is not in HWK_STAGE1_CACHE (%s): %v", p.Name, p.Version, cache, err)
		}
	}

	out := filepath.Join(t.TempDir(), "stage1.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	start := time.Now()
	a, err := assemble(context.Background(), bw, debs, AssembleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)

	var scanned, replaced []string
	for i, p := range a.pkgs {
		if a.replacesAny(i) {
			scanned = append(scanned, p.Package.Name)
		}
		for _, l := range p.list {
			if p.dropped[l] {
				replaced = append(replaced, p.Package.Name+":"+l)
			}
		}
	}
	// What reading ahead costs, within the assembly time.
	a.replacers = map[string][]int{}
	start = time.Now()
	if err := a.scanReplacers(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("assembled %d packages in %v, of which %v reading ahead the paths of the %d that replace another of the set %v; %d replaced files left out %v",
		len(debs), elapsed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), len(scanned), scanned, len(replaced), replaced)

	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	tr := tar.NewReader(bufio.NewReaderSize(f, 1<<20))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if seen[name] {
			t.Errorf("%s (type %c) is in the tar twice", name, h.Typeflag)
		}
		seen[name] = true
	}
	t.Logf("%d paths, each once", len(seen))
}
