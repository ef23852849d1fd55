package imagedist

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

func allFormats(m *nodeimage.Manifest) []nodeimage.Format {
	var out []nodeimage.Format
	for _, f := range nodeimage.Formats {
		if _, ok := m.Artifacts[f]; ok {
			out = append(out, f)
		}
	}
	return out
}

func pack(t *testing.T, ti *testImage, formats ...nodeimage.Format) *Packed {
	t.Helper()
	if len(formats) == 0 {
		formats = allFormats(ti.m)
	}
	p, err := Pack(context.Background(), ti.m, PackOptions{CacheDir: ti.cache, Formats: formats, Docker: ti.docker})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// assertSameImage checks that the image in cache is the test image: the
// same manifest.json, byte for byte, and the same files.
func assertSameImage(t *testing.T, want *nodeimage.Manifest, cache string) *nodeimage.Manifest {
	t.Helper()
	list, err := nodeimage.List(cache)
	if err != nil || len(list) != 1 {
		t.Fatalf("cache %s holds %d images (%v)", cache, len(list), err)
	}
	got := list[0]
	a, _ := os.ReadFile(filepath.Join(want.Dir, "manifest.json"))
	b, _ := os.ReadFile(filepath.Join(got.Dir, "manifest.json"))
	if !bytes.Equal(a, b) {
		t.Errorf("manifest.json differs:\n%s\nwant:\n%s", b, a)
	}
	for f, art := range want.Artifacts {
		if art.Path == "" {
			continue
		}
		x, _ := os.ReadFile(want.FilePath(f))
		y, err := os.ReadFile(got.FilePath(f))
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs (%v)", f, err)
		}
	}
	return got
}

// assertNothingCached checks that a failed pull or load left no image and
// no download behind.
func assertNothingCached(t *testing.T, cache string) {
	t.Helper()
	entries, _ := os.ReadDir(nodeimage.ImagesDir(cache))
	if len(entries) > 0 {
		t.Errorf("the cache holds %v after a failure", entries)
	}
	blobs, _ := os.ReadDir(BlobsDir(cache))
	if len(blobs) > 0 {
		t.Errorf("the cache keeps blobs %v after a digest failure", blobs)
	}
}

// TestSaveLoad checks that a saved archive loads into another cache as the
// same image (manifest and files byte for byte, the docker format back in
// the engine), with no registry at all.
func TestSaveLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds disks with qemu-img and uses the Docker engine")
	}
	ti := newTestImage(t, 6, true)
	p := pack(t, ti)
	file := filepath.Join(t.TempDir(), "node.tar")
	if err := Save(context.Background(), file, "v1.35.4", p, nil); err != nil {
		t.Fatal(err)
	}
	// The engine loses the image, so the load has to bring it back.
	c, _ := ti.docker()
	removeImage(c, ti.m.Artifacts[nodeimage.FormatDocker].DockerImage)

	im := archiveImage(t, file)
	if im.Index.Digest != p.Index.Digest || len(im.Formats()) != 5 {
		t.Errorf("archive index %s (packed %s), formats %v", im.Index.Digest, p.Index.Digest, im.Formats())
	}
	cache := t.TempDir()
	got, err := im.Unpack(context.Background(), UnpackOptions{CacheDir: cache, Formats: im.Formats(), Docker: ti.docker})
	if err != nil {
		t.Fatal(err)
	}
	assertSameImage(t, ti.m, cache)
	if got.Origin == nil || got.Origin.Archive != file || got.Origin.Digest != p.Index.Digest.String() {
		t.Errorf("origin %+v", got.Origin)
	}
	if !got.Has(context.Background(), nodeimage.FormatDocker, ti.docker) {
		t.Error("the docker format is not back in the engine")
	}

	// Loading again finds everything there and moves nothing.
	var moved int64
	if _, err := im.Unpack(context.Background(), UnpackOptions{CacheDir: cache, Formats: im.Formats(), Docker: ti.docker,
		Progress: func(_ string, done, _ int64) { moved += done }}); err != nil || moved != 0 {
		t.Errorf("second load: moved %d bytes, %v", moved, err)
	}
}

// TestLoadCorruptArchive checks that a flipped byte in a layer is a digest
// error and nothing enters the cache, and that a compressed archive is
// refused with what to do.
func TestLoadCorruptArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds disks with qemu-img")
	}
	ti := newTestImage(t, 4, false)
	p := pack(t, ti, nodeimage.FormatQCOW2, nodeimage.FormatVDI)
	file := filepath.Join(t.TempDir(), "node.tar")
	if err := Save(context.Background(), file, "v1.35.4", p, nil); err != nil {
		t.Fatal(err)
	}
	var layer digest.Digest
	for _, b := range p.blobs {
		if b.format == nodeimage.FormatQCOW2 && b.path != "" {
			layer = b.desc.Digest
		}
	}
	flipByteIn(t, file, blobPath(layer))

	im := archiveImage(t, file)
	cache := t.TempDir()
	_, err := im.Unpack(context.Background(), UnpackOptions{CacheDir: cache, Formats: []nodeimage.Format{nodeimage.FormatQCOW2}})
	var de *DigestError
	if !errors.As(err, &de) || de.Want != layer {
		t.Fatalf("load of a corrupt layer: %v", err)
	}
	assertNothingCached(t, cache)
	// The other layer is whole and loads.
	if _, err := im.Unpack(context.Background(), UnpackOptions{CacheDir: cache, Formats: []nodeimage.Format{nodeimage.FormatVDI}}); err != nil {
		t.Errorf("the whole layer: %v", err)
	}

	gz := file + ".gz"
	if err := os.WriteFile(gz, []byte{0x1f, 0x8b, 8, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenArchive(context.Background(), gz); err == nil || !bytes.Contains([]byte(err.Error()), []byte("gunzip")) {
		t.Errorf("gzip archive: %v", err)
	}
}

// TestPackRefusesChangedFile checks that a cached file that is not what
// the image was built with is never packed.
func TestPackRefusesChangedFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds disks with qemu-img")
	}
	ti := newTestImage(t, 2, false)
	flipByteAt(t, ti.m.FilePath(nodeimage.FormatVHDX), 100)
	_, err := Pack(context.Background(), ti.m, PackOptions{CacheDir: ti.cache, Formats: []nodeimage.Format{nodeimage.FormatVHDX}})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("is not the file the image was built with")) {
		t.Errorf("pack of a changed file: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(ti.cache, "blobs")); len(entries) != 0 {
		t.Errorf("a failed pack left %v", entries)
	}
}

// flipByteIn flips a byte in the middle of the tar entry name of file.
func flipByteIn(t *testing.T, file, name string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	cr := &countingReader{r: f}
	tr := tar.NewReader(cr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("%s has no %s", file, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == name {
			// The reader has consumed the header: the entry starts here.
			off := cr.n + h.Size/2
			f.Close()
			flipByteAt(t, file, off)
			return
		}
	}
}

func flipByteAt(t *testing.T, file string, off int64) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// archiveImage opens the archive file and returns the one image it holds.
func archiveImage(t *testing.T, file string) *Image {
	t.Helper()
	a, err := OpenArchive(context.Background(), file)
	if err != nil {
		t.Fatal(err)
	}
	ims, err := a.Images(context.Background())
	if err != nil || len(ims) != 1 {
		t.Fatalf("images %v, %v", ims, err)
	}
	return ims[0]
}
