package debian_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/hwk-dev/hwk/internal/debian"
	"github.com/hwk-dev/hwk/internal/download"
	"github.com/hwk-dev/hwk/internal/testing/debtest"
)

// lockOf returns a lock of all the mirror's packages, in the given order.
func lockOf(m *debtest.Mirror, debs []debtest.Deb) *debian.Lock {
	l := &debian.Lock{Mirror: m.URL, Suite: m.Suite, Component: "main", Arch: "amd64"}
	for _, d := range debs {
		data := m.Debs[d.Package]
		sum := sha256.Sum256(data)
		l.Packages = append(l.Packages, debian.LockedPackage{
			Name: d.Package, Version: d.Version, Architecture: "amd64", MultiArch: d.MultiArch,
			Filename: d.Filename(), Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]),
		})
	}
	return l
}

func debRequests(m *debtest.Mirror) int {
	n := 0
	for _, r := range m.Requests() {
		if strings.HasSuffix(r, ".deb") {
			n++
		}
	}
	return n
}

func TestFetchThenCacheHit(t *testing.T) {
	m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: rootDebs})
	l := lockOf(m, rootDebs)
	cache := t.TempDir()
	var mu sync.Mutex
	finished := map[string]bool{}
	c := &download.Client{HTTP: m.Server.Client(), CacheDir: cache}
	paths, err := debian.Fetch(context.Background(), c, l, debian.FetchOptions{Progress: func(p debian.LockedPackage, done, total int64) {
		if done == total {
			mu.Lock()
			finished[p.Name] = true
			mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != len(rootDebs) {
		t.Fatalf("%d paths for %d packages", len(paths), len(rootDebs))
	}
	for i, d := range rootDebs {
		got, err := os.ReadFile(paths[i])
		if err != nil || string(got) != string(m.Debs[d.Package]) {
			t.Errorf("path %d (%s) does not hold %s's .deb: %v", i, paths[i], d.Package, err)
		}
		if !finished[d.Package] {
			t.Errorf("the progress hook never saw %s finish", d.Package)
		}
	}
	before := debRequests(m)
	if before != len(rootDebs) {
		t.Errorf("%d .deb requests for %d packages", before, len(rootDebs))
	}

	// From the cache, each package is still reported done, so that a
	// sum of the progress reaches the lock's size.
	var cachedBytes int64
	again, err := debian.Fetch(context.Background(), &download.Client{HTTP: m.Server.Client(), CacheDir: cache}, l, debian.FetchOptions{Parallel: 1,
		Progress: func(p debian.LockedPackage, done, total int64) {
			if done == total {
				cachedBytes += done
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if n := debRequests(m) - before; n != 0 {
		t.Errorf("a second fetch from the same cache made %d requests", n)
	}
	for i := range paths {
		if again[i] != paths[i] {
			t.Errorf("path %d moved: %s then %s", i, paths[i], again[i])
		}
	}
	var size int64
	for _, p := range l.Packages {
		size += p.Size
	}
	if cachedBytes != size {
		t.Errorf("the cache hits reported %d bytes done, the lock holds %d", cachedBytes, size)
	}
}

func TestFetchBadSHA256(t *testing.T) {
	m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: rootDebs, Faults: debtest.Faults{BadDeb: "libc6"}})
	l := lockOf(m, rootDebs)
	_, err := debian.Fetch(context.Background(), &download.Client{HTTP: m.Server.Client(), CacheDir: t.TempDir()}, l, debian.FetchOptions{})
	if err == nil {
		t.Fatal("a .deb with other bytes than the lock's was accepted")
	}
	libc := l.Packages[2]
	for _, want := range []string{"libc6", libc.Version, m.URL + "/" + libc.Filename, libc.SHA256, "use another mirror", "relock"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestFetchGoneFromMirror(t *testing.T) {
	m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: rootDebs})
	l := lockOf(m, rootDebs)
	l.Packages[1].Version = "3.5.52"
	l.Packages[1].Filename = "pool/main/b/base-passwd/base-passwd_3.5.52_amd64.deb"
	_, err := debian.Fetch(context.Background(), &download.Client{HTTP: m.Server.Client(), CacheDir: t.TempDir()}, l, debian.FetchOptions{})
	if err == nil {
		t.Fatal("a package the mirror does not have was fetched")
	}
	for _, want := range []string{"base-passwd 3.5.52", "gone from the mirror", "404", "relock", "use a mirror"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
