package debian_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hwk-dev/hwk/internal/debian"
	"github.com/hwk-dev/hwk/internal/download"
)

// TestStage1ConfiguresInDocker checks the stage-1 design: the node image's
// package set (node-images/linux/debian.lock.yaml, in its order), fetched
// from bookworm, assembled in Go and loaded as a one-layer image, must
// configure with one `dpkg --configure -a` in an unprivileged container
// with no network. It runs only with HWK_STAGE1_DOCKER=1.
func TestStage1ConfiguresInDocker(t *testing.T) {
	// Why opt-in: it needs the network and a Docker engine (make
	// node-image-test sets it). HWK_STAGE1_CACHE keeps the .debs between
	// runs.
	if os.Getenv("HWK_STAGE1_DOCKER") != "1" {
		t.Skip("needs deb.debian.org and a Docker engine: set HWK_STAGE1_DOCKER=1 to run it")
	}
	ctx := context.Background()
	lockFile := filepath.Join("..", "..", "node-images", "linux", "debian.lock.yaml")
	lf, err := os.Open(lockFile)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := debian.ReadLock(lf)
	lf.Close()
	if err != nil {
		t.Fatalf("%s: %v", lockFile, err)
	}
	t.Logf("%d packages from %s (InRelease of %s)", len(lock.Packages), lockFile, lock.InRelease.Date)

	cache := os.Getenv("HWK_STAGE1_CACHE")
	if cache == "" {
		cache = t.TempDir()
	}
	start := time.Now()
	paths, err := debian.Fetch(ctx, &download.Client{CacheDir: cache}, lock, debian.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, p := range lock.Packages {
		size += p.Size
	}
	t.Logf("phase fetch: %v (%d .debs, %.1f MiB)", time.Since(start).Round(time.Millisecond), len(paths), float64(size)/(1<<20))

	debs := make([]debian.Deb, len(paths))
	for i, p := range lock.Packages {
		debs[i] = debian.Deb{Package: p, Path: paths[i]}
	}
	work := t.TempDir()
	stage1 := filepath.Join(work, "stage1.tar")
	start = time.Now()
	f, err := os.Create(stage1)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := debian.Assemble(ctx, bw, debs, debian.AssembleOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(stage1)
	t.Logf("phase assemble: %v (%.1f MiB tar)", time.Since(start).Round(time.Millisecond), float64(fi.Size())/(1<<20))
	if f, err := os.Open(stage1); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("stage-1 tar: %d paths, each once", noPathTwice(t, bufio.NewReaderSize(f, 1<<20)))
		f.Close()
	}

	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	image := "hwk-stage1-test:" + hex.EncodeToString(suffix)
	container := "hwk-stage1-test-" + hex.EncodeToString(suffix)
	start = time.Now()
	loadImage(t, stage1, filepath.Join(work, "image.tar"), image)
	if os.Getenv("HWK_STAGE1_KEEP") != "1" {
		t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", image).Run() })
	}
	t.Logf("phase load: %v (%s)", time.Since(start).Round(time.Millisecond), image)

	// Unprivileged and offline: what a user's Docker Desktop allows, and
	// proof that configuring needs nothing from the network.
	docker(t, "run", "-d", "--name", container, "--network", "none", image, "sleep", "infinity")
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", container).Run() })
	if os.Getenv("HWK_STAGE1_PREINST") == "1" {
		// The experiment of plan40 Q2: run each preinst as dpkg would
		// before unpacking a package that was not installed, in unpack
		// order, to compare with configuring without them.
		var names []string
		for _, p := range lock.Packages {
			names = append(names, dpkgNameOf(p))
		}
		script := `set -e
v=$(dpkg-query -W -f '${Version}' dpkg)
for p in ` + strings.Join(names, " ") + `; do
  f=/var/lib/dpkg/info/$p.preinst
  [ -x "$f" ] || continue
  echo "preinst install: $p"
  DPKG_MAINTSCRIPT_NAME=preinst DPKG_MAINTSCRIPT_PACKAGE=${p%%:*} DPKG_MAINTSCRIPT_ARCH=amd64 \
  DPKG_MAINTSCRIPT_PACKAGE_REFCOUNT=1 DPKG_ROOT= DPKG_ADMINDIR=/var/lib/dpkg DPKG_RUNNING_VERSION=$v "$f" install
done`
		start = time.Now()
		out, rc := dockerExec(container, "sh", "-c", script)
		t.Logf("phase preinst: %v, rc=%d\n%s", time.Since(start).Round(time.Millisecond), rc, out)
		if rc != 0 {
			t.Fatalf("a preinst failed")
		}
	}
	start = time.Now()
	out, rc := dockerExec(container, "dpkg", "--configure", "-a")
	t.Logf("phase configure: %v, rc=%d", time.Since(start).Round(time.Millisecond), rc)
	if rc != 0 {
		t.Errorf("dpkg --configure -a: rc=%d\n%s", rc, out)
	} else {
		t.Logf("dpkg --configure -a output (tail):\n%s", tail(out, 15))
	}

	check := func(what string, ok func(out string, rc int) bool, args ...string) {
		t.Helper()
		out, rc := dockerExec(container, args...)
		if !ok(out, rc) {
			t.Errorf("check %s: FAIL (rc=%d)\n%s", what, rc, tail(out, 30))
			return
		}
		t.Logf("check %s: ok: %s", what, strings.TrimSpace(tail(out, 3)))
	}
	check("dpkg --audit empty", func(out string, rc int) bool { return rc == 0 && strings.TrimSpace(out) == "" }, "dpkg", "--audit")
	check(fmt.Sprintf("all %d packages ii", len(lock.Packages)), func(out string, rc int) bool {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		for _, l := range lines {
			if !strings.HasPrefix(l, "ii ") {
				return false
			}
		}
		return rc == 0 && len(lines) == len(lock.Packages)
	}, "dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${binary:Package}\n")
	check("/lib64/ld-linux-x86-64.so.2", func(_ string, rc int) bool { return rc == 0 }, "test", "-e", "/lib64/ld-linux-x86-64.so.2")
	check("getent passwd has system users", func(out string, rc int) bool {
		for _, u := range []string{"root:", "_apt:", "messagebus:", "systemd-network:"} {
			if !strings.Contains(out, "\n"+u) && !strings.HasPrefix(out, u) {
				return false
			}
		}
		return rc == 0
	}, "getent", "passwd")
	check("iptables -V nf_tables", func(out string, rc int) bool { return rc == 0 && strings.Contains(out, "nf_tables") }, "iptables", "-V")
	check("/etc/ssl/certs has >100 certs", func(out string, rc int) bool {
		n, err := strconv.Atoi(strings.TrimSpace(out))
		return rc == 0 && err == nil && n > 100
	}, "sh", "-c", "ls /etc/ssl/certs/*.pem | wc -l")
	check("ldconfig -p non-empty", func(out string, rc int) bool { return rc == 0 && strings.Count(out, "\n") > 10 }, "ldconfig", "-p")
	check("/boot/initrd.img-*", func(out string, rc int) bool { return rc == 0 && strings.Contains(out, "initrd.img-") }, "sh", "-c", "ls /boot/initrd.img-*")
	check("/etc/shadow", func(_ string, rc int) bool { return rc == 0 }, "test", "-s", "/etc/shadow")
	out, _ = dockerExec(container, "sh", "-c", "ls -la / | grep -E 'vmlinuz|initrd'; ls -la /lib/modules/*/")
	t.Logf("kernel links and modules dir (compare with debootstrap's vmlinuz.old and initrd.img.old):\n%s", tail(out, 20))
	check("no .dpkg-new left", func(out string, _ int) bool { return strings.TrimSpace(out) == "" }, "sh", "-c", "find / -xdev -name '*.dpkg-new' 2>/dev/null")
}

// loadImage makes a one-layer image of the stage-1 tar and loads it into
// the Docker engine under tag.
func loadImage(t *testing.T, stage1, out, tag string) {
	t.Helper()
	layer, err := tarball.LayerFromFile(stage1, tarball.WithCompressionLevel(1))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive", "DEBCONF_NONINTERACTIVE_SEEN=true", "LC_ALL=C"},
		Cmd: []string{"/bin/sh"},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		t.Fatal(err)
	}
	docker(t, "load", "-i", out)
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func dockerExec(container string, args ...string) (string, int) {
	out, err := exec.Command("docker", append([]string{"exec", container}, args...)...).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		return string(out) + err.Error(), -1
	}
	return string(out), 0
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func dpkgNameOf(p debian.LockedPackage) string {
	if p.MultiArch == "same" {
		return p.Name + ":" + p.Architecture
	}
	return p.Name
}
