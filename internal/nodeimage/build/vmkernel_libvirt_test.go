package build

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/internal/drivers/libvirt"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// TestVMKernel checks that the images' Debian userland, configured in a
// libvirt VM (TCG where there is no KVM) from a disk written in Go, reads
// back as the root the Docker engine makes from the same packages, that a
// failing script comes back as an error with its output, and that no VM or
// volume is left; with HWK_NODE_IMAGE_TEST=1, where libvirt answers.
func TestVMKernel(t *testing.T) {
	if os.Getenv("HWK_NODE_IMAGE_TEST") != "1" {
		t.Skip("boots a VM; set HWK_NODE_IMAGE_TEST=1 (make node-image-test)")
	}
	ctx := context.Background()
	d := libvirt.New(libvirt.Options{Dirs: state.Dirs{Data: t.TempDir(), Cache: t.TempDir()}})
	if _, err := d.Preflight(ctx); err != nil {
		if os.Getenv("HWK_REQUIRE_LIBVIRT") == "1" {
			t.Fatal(err)
		}
		t.Skipf("needs libvirt: %v", err)
	}
	// The build's cache, for the packages (and the Docker-made userland,
	// when a build has made it).
	cache := state.DefaultDirs().Cache
	var log bytes.Buffer
	docker := func() (client.APIClient, error) { return client.New(client.FromEnv) }
	step := func(_ string, fn func() error) error { return fn() }
	ref := &builder{opts: nodeimage.Options{CacheDir: cache, Log: &log, Docker: docker, DiskSize: nodeimage.DefaultDiskSize, Step: step}}
	want, err := ref.userland(ctx)
	if err != nil {
		t.Fatalf("the userland, configured by Docker: %v\n%s", err, log.String())
	}

	b := &builder{opts: nodeimage.Options{CacheDir: cache, Log: &log, VM: d, DiskSize: nodeimage.DefaultDiskSize, Step: step}}
	lock, err := readLock(images.Recipe, "userland.lock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	script, err := fs.ReadFile(images.Recipe, "userland.sh")
	if err != nil {
		t.Fatal(err)
	}
	debs, err := b.fetchDebs(ctx, "userland", lock, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stage1 := filepath.Join(dir, "stage1.tar")
	if err := assemble(ctx, stage1, debs); err != nil {
		t.Fatal(err)
	}
	k := b.kernel()
	if k.Name() != "a libvirt VM" {
		t.Fatalf("with Options.VM the kernel is %q", k.Name())
	}
	got := filepath.Join(dir, "vm.tar")
	if err := b.configure(ctx, k, "userland", stage1, stage2{script: script}, got); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("build log:\n%s", lastLines(log.String(), 6))
	// The same files, modes, owners, xattrs, link targets and contents,
	// except for files that record when they were made (madeWhen) and hard
	// links, which the VM's root has as copies.
	if diff := diffRoots(t, want, got); len(diff) > 0 {
		t.Errorf("the VM's root differs from Docker's:\n  %s", strings.Join(diff, "\n  "))
	}

	// A failed build keeps its VM's console log for the user; this one is
	// the test's, in the build's cache.
	logs := filepath.Join(cache, "build", "vm", "hwk-build-userland-*.console.log")
	before, _ := filepath.Glob(logs)
	t.Cleanup(func() {
		after, _ := filepath.Glob(logs)
		for _, p := range after {
			if !slices.Contains(before, p) {
				os.Remove(p)
			}
		}
	})
	failed := filepath.Join(dir, "failed.tar")
	err = b.configure(ctx, k, "userland", stage1, stage2{script: []byte("echo dpkg-said-this >&2\nexit 3\n")}, failed)
	if err == nil || !strings.Contains(err.Error(), "stage2.sh exited with 3:\ndpkg-said-this") {
		t.Errorf("a failing stage 2: %v", err)
	}
	if _, serr := os.Stat(failed); serr == nil {
		t.Error("a failed stage 2 left its root")
	}
	if left := leftInLibvirt(t, "hwk-build-userland-"); len(left) > 0 {
		t.Errorf("left in libvirt: %v", left)
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// rootEntry is what of a tar entry two roots must share.
type rootEntry struct {
	typ        byte
	mode       int64
	uid, gid   int
	link, data string // data: the SHA-256 of a regular file
	xattrs     string
}

// madeWhen reports whether name is a file whose contents record when or on
// which file system it was made: logs, debconf's caches, the shadow files'
// change dates, and ldconfig's auxiliary cache (inode numbers and times of
// the libraries). Only their contents may differ.
func madeWhen(name string) bool {
	return strings.HasPrefix(name, "var/log/") || strings.HasPrefix(name, "var/cache/debconf/") ||
		name == "etc/shadow" || name == "etc/shadow-" || name == "etc/gshadow" || name == "var/cache/ldconfig/aux-cache"
}

// diffRoots compares two root tars.
func diffRoots(t *testing.T, a, b string) []string {
	ea, eb := readRoot(t, a), readRoot(t, b)
	t.Logf("compared %d entries of Docker's root with %d of the VM's", len(ea), len(eb))
	var diff []string
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range ea {
			if !yield(n) {
				return
			}
		}
		for n := range eb {
			if _, ok := ea[n]; !ok && !yield(n) {
				return
			}
		}
	}) {
		x, inA := ea[n]
		y, inB := eb[n]
		switch {
		case !inA:
			diff = append(diff, "only in the VM's: "+n)
		case !inB:
			diff = append(diff, "only in Docker's: "+n)
		case madeWhen(n):
			x.data, y.data = "", ""
			fallthrough
		default:
			if x != y {
				diff = append(diff, fmt.Sprintf("%s: Docker %+v, VM %+v", n, x, y))
			}
		}
	}
	return diff
}

func readRoot(t *testing.T, p string) map[string]rootEntry {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]rootEntry{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/"), "/")
		if name == "" || name == "." {
			continue
		}
		e := rootEntry{typ: h.Typeflag, mode: h.Mode & 0o7777, uid: h.Uid, gid: h.Gid, link: h.Linkname}
		// The VM's root comes from an ext4 written in Go, which stores a
		// hard link as a copy: a link counts as its target's contents.
		if e.typ == tar.TypeLink {
			target, ok := out[strings.TrimPrefix(strings.TrimPrefix(e.link, "./"), "/")]
			if !ok {
				t.Fatalf("%s: hard link to %s, which the tar has not had", name, e.link)
			}
			e.typ, e.link, e.data = tar.TypeReg, "", target.data
		}
		var xs []string
		for k, v := range h.PAXRecords {
			if strings.HasPrefix(k, "SCHILY.xattr.") {
				xs = append(xs, k+"="+v)
			}
		}
		slices.Sort(xs)
		e.xattrs = strings.Join(xs, ",")
		if h.Typeflag == tar.TypeReg {
			s := sha256.New()
			if _, err := io.Copy(s, tr); err != nil {
				t.Fatal(err)
			}
			e.data = fmt.Sprintf("%x", s.Sum(nil))
		}
		out[name] = e
	}
}

// leftInLibvirt lists the domains and pool volumes whose names start with
// prefix, as virsh sees them.
func leftInLibvirt(t *testing.T, prefix string) []string {
	t.Helper()
	var left []string
	for _, args := range [][]string{{"list", "--all", "--name"}, {"vol-list", "hwk"}} {
		out, err := exec.Command("virsh", append([]string{"-c", "qemu:///system"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("virsh %s: %v\n%s", args[0], err, out)
		}
		for _, f := range strings.Fields(string(out)) {
			if strings.HasPrefix(f, prefix) {
				left = append(left, f)
			}
		}
	}
	return left
}
