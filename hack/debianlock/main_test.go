package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/debian"
	"github.com/hwk-dev/hwk/internal/nodeimage/build"
	"github.com/hwk-dev/hwk/internal/state"
)

// committed reads a target's lock from the repository.
func committed(t *testing.T, tg Target) ([]byte, *debian.Lock) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(tg.Path)))
	if err != nil {
		t.Fatalf("%s: %v: make it with `%s`", tg.Path, err, Command)
	}
	l, err := debian.ReadLock(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", tg.Path, err)
	}
	return data, l
}

// TestCommittedLocksAreConsistent checks the committed locks against the
// recipe without the network: a package list edited without relocking
// fails here. That the order is the resolver's is checked where the index
// is at hand: TestResolveTwiceSame (internal/debian) and TestLiveLocks.
func TestCommittedLocksAreConsistent(t *testing.T) {
	targets, err := Targets()
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		t.Run(tg.Name, func(t *testing.T) {
			data, l := committed(t, tg)
			stale := fmt.Sprintf("%s is stale: run `%s` (make debian-lock) and commit the result", tg.Path, Command)
			want := slices.Compact(slices.Sorted(slices.Values(tg.Recipe.Packages)))
			if !slices.Equal(l.Requested, want) {
				t.Errorf("the lock was made for packages\n  %v\nthe recipe asks for\n  %v\n%s", l.Requested, want, stale)
			}
			if l.Mirror != tg.Recipe.Mirror || l.Suite != tg.Recipe.Suite || l.Component != Component || l.Arch != Arch {
				t.Errorf("the lock is for %s %s %s/%s, the recipe for %s %s %s/%s: %s", l.Mirror, l.Suite, l.Component, l.Arch, tg.Recipe.Mirror, tg.Recipe.Suite, Component, Arch, stale)
			}
			have := map[string]bool{}
			for _, p := range l.Packages {
				have[p.Name] = true
			}
			for _, n := range l.Requested {
				if !have[n] {
					t.Errorf("requested %s is not among the lock's packages: %s", n, stale)
				}
			}
			for _, n := range debian.MinbaseExtra {
				if !have[n] {
					t.Errorf("%s (debootstrap's minbase) is not among the lock's packages: %s", n, stale)
				}
			}
			// Written by this command, not edited: what it would write for
			// the parsed lock is the file, header included.
			var again bytes.Buffer
			if err := debian.WriteLock(&again, l, tg.Header()); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again.Bytes(), data) {
				t.Errorf("%s is not as %s writes it (edited by hand, or the header changed): %s", tg.Path, Command, stale)
			}
		})
	}
}

// TestLockMatchesDebootstrap compares the committed locks with what
// debootstrap installs for the same recipe: the oracle for the resolver,
// which the build uses in its place. HWK_DEBOOTSTRAP_CACHE (or, under make
// node-image-test, hwk's cache) is where the test debootstraps today's
// recipes, once (as root, with debootstrap installed);
// HWK_DEBOOTSTRAP_TAR names rootfs tars made before (a path list; a name
// starting with "userland-" is compared with the userland lock, any other
// with the node's). The names must match exactly; versions may
// differ when the mirror has moved on since the tar was made, and are
// reported.
func TestLockMatchesDebootstrap(t *testing.T) {
	env := os.Getenv("HWK_DEBOOTSTRAP_TAR")
	cache := os.Getenv("HWK_DEBOOTSTRAP_CACHE")
	if cache == "" && os.Getenv("HWK_NODE_IMAGE_TEST") == "1" {
		// make node-image-test: hwk's cache, where the roots stay
		// between runs.
		cache = state.DefaultDirs().Cache
	}
	if cache != "" {
		node, userland := debootstrapTars(t, cache)
		env = strings.Join([]string{node, userland}, string(filepath.ListSeparator))
	}
	if env == "" {
		t.Skip("set HWK_DEBOOTSTRAP_CACHE to a hwk cache directory a node image was built in (e.g. ~/.cache/hwk), or HWK_DEBOOTSTRAP_TAR to debootstrapped rootfs tars (node-*.tar, userland-*.tar)")
	}
	targets, err := Targets()
	if err != nil {
		t.Fatal(err)
	}
	for _, tarPath := range filepath.SplitList(env) {
		tg := targets[0]
		if strings.HasPrefix(filepath.Base(tarPath), "userland-") {
			tg = targets[1]
		}
		t.Run(filepath.Base(tarPath), func(t *testing.T) {
			installed, err := dpkgInstalled(tarPath)
			if err != nil {
				t.Fatal(err)
			}
			_, l := committed(t, tg)
			locked := map[string]string{}
			for _, p := range l.Packages {
				locked[p.Name] = p.Version
			}
			var onlyLock, onlyDeb, versions []string
			for _, n := range sortedKeys(locked) {
				v, ok := installed[n]
				switch {
				case !ok:
					onlyLock = append(onlyLock, n)
				case v != locked[n]:
					versions = append(versions, fmt.Sprintf("%s %s (debootstrap) → %s (lock)", n, v, locked[n]))
				}
			}
			for _, n := range sortedKeys(installed) {
				if _, ok := locked[n]; !ok {
					onlyDeb = append(onlyDeb, n)
				}
			}
			t.Logf("%s: %d packages installed by debootstrap, %d in %s", tarPath, len(installed), len(locked), tg.Path)
			if len(versions) > 0 {
				t.Logf("versions differ (the mirror moved on since the tar was made):\n  %s", strings.Join(versions, "\n  "))
			}
			if len(onlyLock)+len(onlyDeb) > 0 {
				t.Errorf("the lock and debootstrap disagree:\n  only in the lock: %v\n  only in debootstrap's root: %v", onlyLock, onlyDeb)
			}
		})
	}
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// dpkgInstalled reads var/lib/dpkg/status from a rootfs tar: the name and
// version of every package in state "install ok installed".
func dpkgInstalled(tarPath string) (map[string]string, error) {
	f, err := os.Open(tarPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(bufio.NewReaderSize(f, 1<<20))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s has no var/lib/dpkg/status: is it a debootstrapped root?", tarPath)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tarPath, err)
		}
		if strings.TrimPrefix(h.Name, "./") != "var/lib/dpkg/status" {
			continue
		}
		out := map[string]string{}
		var name, version, status string
		flush := func() {
			if name != "" && status == "install ok installed" {
				out[name] = version
			}
			name, version, status = "", "", ""
		}
		sc := bufio.NewScanner(tr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				flush()
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok || line[0] == ' ' {
				continue
			}
			switch k {
			case "Package":
				name = strings.TrimSpace(v)
			case "Version":
				version = strings.TrimSpace(v)
			case "Status":
				status = strings.TrimSpace(v)
			}
		}
		flush()
		return out, sc.Err()
	}
}

// TestLiveLocks resolves the recipe against the live mirror, reports the
// size and timings, and compares the result with the committed locks: the
// same InRelease must give the same lock, order included. It needs the
// network, so it runs only with HWK_DEBIAN_NET=1.
func TestLiveLocks(t *testing.T) {
	if os.Getenv("HWK_DEBIAN_NET") != "1" {
		t.Skip("reads deb.debian.org: set HWK_DEBIAN_NET=1 to run it")
	}
	targets, err := Targets()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, tg := range targets {
		t.Run(tg.Name, func(t *testing.T) {
			start := time.Now()
			rel, idx, err := ReadIndex(ctx, &http.Client{Timeout: 5 * time.Minute}, tg.Recipe.Mirror, tg.Recipe.Suite)
			if err != nil {
				t.Fatal(err)
			}
			read := time.Since(start)
			start = time.Now()
			l, err := debian.NewLock(rel, idx, tg.Recipe.Mirror, tg.Recipe.Suite, tg.Recipe.Packages)
			if err != nil {
				t.Fatal(err)
			}
			resolve := time.Since(start)
			var size int64
			for _, p := range l.Packages {
				size += p.Size
			}
			t.Logf("%s %s (InRelease %s, %s): %d packages of %d in the index, %.1f MiB of .deb; index read and parsed in %s, resolved in %s",
				tg.Recipe.Mirror, tg.Recipe.Suite, l.InRelease.Date, rel.Version, len(l.Packages), len(idx.Packages), float64(size)/(1<<20), read.Round(time.Millisecond), resolve.Round(time.Millisecond))
			_, old := committed(t, tg)
			switch {
			case old.Equal(l):
				t.Logf("%s is current", tg.Path)
			case old.InRelease.SHA256 == l.InRelease.SHA256:
				t.Errorf("the same InRelease resolved to another lock than %s:\n  %s", tg.Path, strings.Join(old.Diff(l), "\n  "))
			default:
				t.Logf("the mirror has moved on since %s was made; `%s` would change:\n  %s", tg.Path, Command, strings.Join(old.Diff(l), "\n  "))
			}
		})
	}
}

// TestLocksNotInRecipe keeps the locks out of the embedded recipes for
// now: the recipes are hashed into the node image's cache key, and nothing
// builds from the locks yet, so embedding them would only force every

// debootstrapTars returns rootfs tars of the node's and the userland's
// Debian recipes as debootstrap --variant=minbase --include makes them,
// cached in cache/debootstrap under a name of everything that shapes them.
func debootstrapTars(t *testing.T, cache string) (node, userland string) {
	t.Helper()
	nodeRecipe, userlandRecipe, err := build.DebianRecipes()
	if err != nil {
		t.Fatal(err)
	}
	return debootstrapTar(t, cache, "node", nodeRecipe), debootstrapTar(t, cache, "userland", userlandRecipe)
}

func debootstrapTar(t *testing.T, cache, kind string, d build.Debian) string {
	t.Helper()
	key := sha256.Sum256([]byte(strings.Join([]string{d.Suite, d.Mirror, Component, strings.Join(d.Packages, ",")}, "\n")))
	file := filepath.Join(cache, "debootstrap", fmt.Sprintf("%s-%s-%x.tar", kind, d.Suite, key[:6]))
	if _, err := os.Stat(file); err == nil {
		return file
	}
	if _, err := exec.LookPath("debootstrap"); err != nil || os.Geteuid() != 0 {
		t.Fatalf("the oracle roots are made with debootstrap, as root: install debootstrap (Debian/Ubuntu: apt-get install debootstrap) and run as root, or set HWK_DEBOOTSTRAP_TAR")
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	work, err := os.MkdirTemp(filepath.Dir(file), "work-")
	if err != nil {
		t.Fatal(err)
	}
	// debootstrap mounts /proc and /sys in the root while it runs; a
	// RemoveAll after a failure must not walk into them.
	t.Cleanup(func() {
		root := filepath.Join(work, "root")
		for _, m := range []string{"proc", "sys"} {
			_ = exec.Command("umount", "-l", filepath.Join(root, m)).Run()
		}
		_ = os.RemoveAll(work)
	})
	root := filepath.Join(work, "root")
	start := time.Now()
	out, err := exec.Command("debootstrap", "--variant=minbase", "--components="+Component,
		"--include="+strings.Join(d.Packages, ","), d.Suite, root, d.Mirror).CombinedOutput()
	if err != nil {
		t.Fatalf("debootstrap %s: %v\n%s", kind, err, lastLines(string(out), 20))
	}
	if out, err := exec.Command("tar", "--numeric-owner", "-C", root, "-cf", file+".tmp", "./var/lib/dpkg").CombinedOutput(); err != nil {
		t.Fatalf("tar %s: %v\n%s", kind, err, out)
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		t.Fatal(err)
	}
	t.Logf("debootstrap %s %s: %s", kind, d.Suite, time.Since(start).Round(time.Second))
	return file
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
