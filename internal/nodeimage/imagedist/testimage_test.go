package imagedist

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// testImage is a small node image the tests build in a fresh cache, in
// every format: qcow2, vhdx and vdi made by qemu-img from one raw disk of
// random and empty blocks, a rootfs tarball, and with docker a busybox
// image in the engine carrying the image's key, as a built docker format does.
type testImage struct {
	m     *nodeimage.Manifest
	cache string
	// docker connects to the engine, when the image has the docker format.
	docker func() (client.APIClient, error)
}

func newTestImage(t *testing.T, diskMiB int, withDocker bool) *testImage {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		if os.Getenv("HWK_REQUIRE_QEMU") == "1" {
			t.Fatal("HWK_REQUIRE_QEMU=1 but there is no qemu-img (Debian: qemu-utils): these tests make disks with it")
		}
		t.Skip("no qemu-img (Debian: qemu-utils)")
	}
	cache := t.TempDir()
	key := make([]byte, 32)
	rand.Read(key)
	m := &nodeimage.Manifest{
		OS: "linux", KubernetesVersion: "v1.35.4", Source: nodeimage.FromSource,
		Key: hex.EncodeToString(key), Built: time.Now().UTC().Truncate(time.Second),
		Components: map[string]string{"containerd": "2.3.1", "debian": "bookworm"},
		Images:     []nodeimage.Image{{Ref: "registry.k8s.io/pause:3.10.1", Digest: "sha256:" + hex.EncodeToString(key), Size: 1234}},
		Artifacts:  map[nodeimage.Format]nodeimage.Artifact{},
		Stages:     []nodeimage.Stage{{Name: "rootfs", Seconds: 12.3}},
	}
	m.Name = "linux-v1.35.4-source-" + m.Key[:12]
	m.Dir = filepath.Join(nodeimage.ImagesDir(cache), m.Name)
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}

	raw := filepath.Join(t.TempDir(), "disk.raw")
	f, err := os.Create(raw)
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 1<<20)
	for i := 0; i < diskMiB; i++ {
		if i%4 == 3 {
			clear(block) // some empty space, as a real disk has
		} else {
			// Why random: it does not compress, so a layer is as big as
			// its disk: big enough to cut a download in the middle.
			rand.Read(block)
		}
		if _, err := f.Write(block); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	for _, fm := range []struct {
		format nodeimage.Format
		qemu   string
	}{{nodeimage.FormatQCOW2, "qcow2"}, {nodeimage.FormatVHDX, "vhdx"}, {nodeimage.FormatVDI, "vdi"}} {
		out := filepath.Join(m.Dir, "disk."+string(fm.format))
		if b, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", fm.qemu, raw, out).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img convert to %s: %v\n%s", fm.qemu, err, b)
		}
		record(t, m, fm.format, out)
	}
	tarball := filepath.Join(m.Dir, "rootfs.tar.gz")
	writeRootfs(t, tarball)
	record(t, m, nodeimage.FormatTar, tarball)

	ti := &testImage{m: m, cache: cache}
	if withDocker {
		ti.docker = requireEngine(t)
		tag := "hwk-test/node:" + m.Key[:12]
		importBusybox(t, ti.docker, tag, m.Key)
		c, _ := ti.docker()
		img, err := c.ImageInspect(context.Background(), tag)
		if err != nil {
			t.Fatal(err)
		}
		m.Artifacts[nodeimage.FormatDocker] = nodeimage.Artifact{DockerImage: tag, DockerID: img.ID, Size: img.Size}
	}
	if err := m.Write(); err != nil {
		t.Fatal(err)
	}
	return ti
}

func record(t *testing.T, m *nodeimage.Manifest, f nodeimage.Format, p string) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	m.Artifacts[f] = nodeimage.Artifact{Path: filepath.Base(p), SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))}
}

// writeRootfs writes a small gzip rootfs tarball, as the tar format is.
func writeRootfs(t *testing.T, p string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	files := map[string]string{"etc/os-release": "ID=debian\n", "etc/hostname": "node\n"}
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	tw.Close()
	zw.Close()
}

// requireEngine connects to the Docker engine; without one the test
// skips, unless HWK_REQUIRE_DOCKER=1 (CI), where it fails.
func requireEngine(t *testing.T) func() (client.APIClient, error) {
	t.Helper()
	c, err := client.New(client.FromEnv)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = c.Ping(ctx, client.PingOptions{})
	}
	if err != nil {
		if os.Getenv("HWK_REQUIRE_DOCKER") == "1" {
			t.Fatalf("HWK_REQUIRE_DOCKER=1 but: %v", err)
		}
		t.Skipf("no Docker engine: %v", err)
	}
	return func() (client.APIClient, error) { return c, nil }
}

// importBusybox imports the host's static busybox as a one-layer image
// under tag, labelled with key as a node image's docker format is, and
// removes it when the test ends.
func importBusybox(t *testing.T, docker func() (client.APIClient, error), tag, key string) {
	t.Helper()
	bin, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("this test needs a static busybox at /bin/busybox (Debian: busybox-static): %v", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "bin/", Mode: 0o755})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin))})
	tw.Write(bin)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/sh", Linkname: "busybox", Mode: 0o777})
	// Some data that does not compress, so the layer is big enough to cut
	// a download of it in the middle.
	payload := make([]byte, 6<<20)
	rand.Read(payload)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "payload", Mode: 0o644, Size: int64(len(payload))})
	tw.Write(payload)
	tw.Close()
	c, _ := docker()
	ctx := context.Background()
	rc, err := c.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, tag,
		client.ImageImportOptions{Changes: []string{`CMD ["/bin/sh"]`, "LABEL " + nodeimage.LabelKey + "=" + key}})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	t.Cleanup(func() { removeImage(c, tag) })
}

func removeImage(c client.APIClient, tag string) {
	c.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
}
