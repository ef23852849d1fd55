package imagedist

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/hwk-dev/hwk/internal/testing/imagearchivetest"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// memSource is a registry (pull, resumable) or an archive in memory:
// blobs by digest.
type memSource struct {
	blobs map[digest.Digest][]byte
	pull  bool
}

func (s *memSource) fetch(_ context.Context, desc ocispec.Descriptor, offset int64) (io.ReadCloser, int64, error) {
	b, ok := s.blobs[desc.Digest]
	if !ok {
		return nil, 0, fmt.Errorf("%s: not found", desc.Digest)
	}
	if offset > int64(len(b)) || !s.pull {
		offset = 0
	}
	return io.NopCloser(bytes.NewReader(b[offset:])), offset, nil
}

func (s *memSource) resumable() bool { return s.pull }

func (s *memSource) add(mediaType string, data []byte) ocispec.Descriptor {
	d := describe(mediaType, data)
	s.blobs[d.Digest] = data
	return d
}

// putImage puts the node image m into src as Pack lays it out (the
// manifest as it is, however hostile), with layers as the content of each
// file format's layer, and returns its index's descriptor.
func putImage(t *testing.T, src *memSource, m *nodeimage.Manifest, layers map[nodeimage.Format][]byte) ocispec.Descriptor {
	t.Helper()
	cdata, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	config := src.add(MediaTypeConfig, cdata)
	src.add(emptyDescriptor.MediaType, emptyJSON)
	imgAnn := imageAnnotations(m)
	idata, err := artifactManifest(ArtifactTypeImage, config, emptyDescriptor, imgAnn)
	if err != nil {
		t.Fatal(err)
	}
	image := src.add(ocispec.MediaTypeImageManifest, idata)
	image.ArtifactType, image.Annotations = ArtifactTypeImage, imgAnn
	manifests := []ocispec.Descriptor{image}
	for f, data := range layers {
		layer := src.add(layerType[f], data)
		layer.Annotations = fileAnnotations(m.Artifacts[f])
		ann := merge(imgAnn, map[string]string{AnnotationFormat: string(f)})
		mdata, err := artifactManifest(artifactType(f), config, layer, ann)
		if err != nil {
			t.Fatal(err)
		}
		d := src.add(ocispec.MediaTypeImageManifest, mdata)
		d.ArtifactType, d.Annotations = artifactType(f), ann
		manifests = append(manifests, d)
	}
	index, err := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: manifests})
	if err != nil {
		t.Fatal(err)
	}
	return src.add(ocispec.MediaTypeImageIndex, index)
}

// memImage returns putImage's image, read back as a pull reads it.
func memImage(t *testing.T, src *memSource, m *nodeimage.Manifest, layers map[nodeimage.Format][]byte) *Image {
	t.Helper()
	im, err := readImage(context.Background(), src, putImage(t, src, m, layers), "registry.example.com/hwk/node:v1")
	if err != nil {
		t.Fatal(err)
	}
	return im
}

func zstdOf(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, err := zstd.NewWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sandbox is a directory holding a cache and, beside it, a sentinel
// directory with one file: untouched, it shows nothing was written outside
// the cache.
type sandbox struct{ root, cache string }

func newSandbox(t *testing.T) *sandbox {
	root := t.TempDir()
	s := &sandbox{root: root, cache: filepath.Join(root, "cache")}
	if err := os.MkdirAll(filepath.Join(root, "sentinel"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sentinel", "keep"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// untouched checks that the only files are the sentinel's and what is
// under the cache (extra: files the test made), that the sentinel is as
// it was, and that no node image is in the cache.
func (s *sandbox) untouched(t *testing.T, extra ...string) {
	t.Helper()
	got := files(t, s.root)
	if !slicesSubset(got, append(extra, "sentinel/keep", "cache/")...) {
		t.Errorf("files outside the cache: %v", got)
	}
	if b, err := os.ReadFile(filepath.Join(s.root, "sentinel", "keep")); err != nil || string(b) != "keep" {
		t.Errorf("the sentinel changed: %q, %v", b, err)
	}
	if entries, _ := os.ReadDir(nodeimage.ImagesDir(s.cache)); len(entries) > 0 {
		t.Errorf("the cache holds %v", entries)
	}
}

// TestLoadRefusesEntriesOutsideTheArchive checks that `hwk node-image
// load` reads the archive in place (blobs are read from the tar by name and
// copied into the cache under names of hwk's making), and that an archive
// with an entry that leads outside it, or a link, is refused before it is
// read as a layout, naming the entry.
func TestLoadRefusesEntriesOutsideTheArchive(t *testing.T) {
	saved := savedSmall(t)
	blob := ""
	tr := tar.NewReader(bytes.NewReader(saved))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if strings.HasPrefix(h.Name, "blobs/sha256/") && h.Typeflag == tar.TypeReg {
			blob = h.Name // one a manifest names
		}
	}
	for _, c := range []struct {
		h    *tar.Header
		want string
	}{
		{&tar.Header{Name: "../escape", Typeflag: tar.TypeReg}, `entry "../escape" leads outside the archive`},
		{&tar.Header{Name: "blobs/../../up", Typeflag: tar.TypeReg}, `entry "blobs/../../up" leads outside the archive`},
		{&tar.Header{Name: "/abs", Typeflag: tar.TypeReg}, `entry "/abs" leads outside the archive`},
		{&tar.Header{Name: `..\win`, Typeflag: tar.TypeReg}, `entry "..\\win" leads outside the archive`},
		{&tar.Header{Name: "blobs/sha256/x", Linkname: "../../../etc/passwd", Typeflag: tar.TypeSymlink}, `entry "blobs/sha256/x" is a link to "../../../etc/passwd", outside the archive`},
		{&tar.Header{Name: "blobs/sha256/x", Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink}, `entry "blobs/sha256/x" is a link to "/etc/passwd", outside the archive`},
		{&tar.Header{Name: "blobs/sha256/y", Linkname: "../outside", Typeflag: tar.TypeLink}, `entry "blobs/sha256/y" is a link to "../outside", outside the archive`},
		// A link inside the archive, in place of a blob: not followed.
		{&tar.Header{Name: "blobs/sha256/z", Linkname: blob, Typeflag: tar.TypeLink}, `entry "blobs/sha256/z" is a link (to "` + blob + `"); hwk reads OCI layouts of plain files and follows no link`},
		{&tar.Header{Name: "dev", Typeflag: tar.TypeChar}, `entry "dev" is a special file`},
		{&tar.Header{Name: "index.json", Typeflag: tar.TypeReg}, "two entries are named index.json"},
	} {
		t.Run(c.h.Name, func(t *testing.T) {
			s := newSandbox(t)
			file := filepath.Join(s.root, "work", "node.tar")
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, imagearchivetest.WithEntry(saved, "", c.h, "x"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := OpenArchive(context.Background(), file)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), file) {
				t.Fatalf("OpenArchive = %v, want %q", err, c.want)
			}
			s.untouched(t, "work/node.tar")
		})
	}
	// The archive as saved loads, and only into the cache.
	s := newSandbox(t)
	file := filepath.Join(s.root, "node.tar")
	if err := os.WriteFile(file, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	im := archiveImage(t, file)
	if _, err := im.Unpack(context.Background(), UnpackOptions{CacheDir: s.cache, Formats: im.Formats()}); err != nil {
		t.Fatal(err)
	}
	if got := files(t, s.root); !slicesSubset(got, "node.tar", "sentinel/keep", "cache/") {
		t.Errorf("files outside the cache: %v", got)
	}
}

// TestPullRefusesPathsOutsideTheCache checks that a pulled or loaded image
// whose manifest or layers would lead outside the cache is refused, naming
// what is wrong, with nothing written outside it and no image cached.
func TestPullRefusesPathsOutsideTheCache(t *testing.T) {
	// Why these paths: what a pull writes is named by hwk (blobs by
	// digest, in the cache's blobs/) or by the image's own manifest (its
	// directory by the image's name, each file by its path). A load reads
	// through the same code, from the archive instead of a registry.
	for _, pull := range []bool{true, false} {
		for _, c := range []struct {
			name string
			edit func(m *nodeimage.Manifest)
			want string
		}{
			{"image name ../../escape", func(m *nodeimage.Manifest) { m.Name = "../../escape" }, `"../../escape" is not a node image name`},
			{"image name /abs", func(m *nodeimage.Manifest) { m.Name = "/abs" }, `"/abs" is not a node image name`},
			{"file ../../../escape", func(m *nodeimage.Manifest) { setPath(m, "../../../escape") }, `names its file "../../../escape", which is not a plain file name`},
			{"file /abs/escape", func(m *nodeimage.Manifest) { setPath(m, "/abs/escape") }, `names its file "/abs/escape", which is not a plain file name`},
			{"file sub/escape", func(m *nodeimage.Manifest) { setPath(m, "sub/escape") }, `names its file "sub/escape", which is not a plain file name`},
			{"file ..", func(m *nodeimage.Manifest) { setPath(m, "..") }, `names its file "..", which is not a plain file name`},
		} {
			t.Run(fmt.Sprintf("%s pull=%v", c.name, pull), func(t *testing.T) {
				s := newSandbox(t)
				m := smallImage(t)
				data, err := os.ReadFile(m.FilePath(nodeimage.FormatQCOW2))
				if err != nil {
					t.Fatal(err)
				}
				c.edit(m)
				src := &memSource{blobs: map[digest.Digest][]byte{}, pull: pull}
				index := putImage(t, src, m, map[nodeimage.Format][]byte{nodeimage.FormatQCOW2: zstdOf(t, data)})
				im, err := readImage(context.Background(), src, index, "registry.example.com/hwk/node:v1")
				if err == nil {
					_, err = im.Unpack(context.Background(), UnpackOptions{CacheDir: s.cache, Formats: []nodeimage.Format{nodeimage.FormatQCOW2}})
				}
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("pull = %v, want %q", err, c.want)
				}
				s.untouched(t)
			})
		}
	}
	// A layer named by something that is not a digest is never fetched,
	// nor written under that name.
	s := newSandbox(t)
	m := smallImage(t)
	src := &memSource{blobs: map[digest.Digest][]byte{}, pull: true}
	im := memImage(t, src, m, map[nodeimage.Format][]byte{nodeimage.FormatQCOW2: zstdOf(t, []byte("x"))})
	d := im.formats[nodeimage.FormatQCOW2]
	d.Digest = "sha256:../../../../sentinel/keep"
	im.formats[nodeimage.FormatQCOW2] = d
	_, err := im.Unpack(context.Background(), UnpackOptions{CacheDir: s.cache, Formats: []nodeimage.Format{nodeimage.FormatQCOW2}})
	if err == nil || !strings.Contains(err.Error(), "qcow2 manifest: invalid checksum digest") {
		t.Fatalf("Unpack of a descriptor with a path for a digest = %v", err)
	}
	s.untouched(t)
}

func setPath(m *nodeimage.Manifest, p string) {
	a := m.Artifacts[nodeimage.FormatQCOW2]
	a.Path = p
	m.Artifacts[nodeimage.FormatQCOW2] = a
}
