package imagedist

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry"

	"github.com/hwk-dev/hwk/internal/testing/imagearchivetest"
	"github.com/hwk-dev/hwk/node-images"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// smallImage returns a node image in a fresh cache with two small file
// formats: a "disk" of random bytes as qcow2 (packing does not look
// inside a disk) and a rootfs tarball. No tool or engine is needed.
func smallImage(t testing.TB) *nodeimage.Manifest {
	t.Helper()
	cache := t.TempDir()
	m := &nodeimage.Manifest{
		OS: "linux", KubernetesVersion: "v1.35.4", Source: nodeimage.FromSource,
		Key: strings.Repeat("ab", 32), Built: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Components: map[string]string{"containerd": "2.3.1"},
		Artifacts:  map[nodeimage.Format]nodeimage.Artifact{},
	}
	m.Name = "linux-v1.35.4-source-" + m.Key[:12]
	m.Dir = filepath.Join(nodeimage.ImagesDir(cache), m.Name)
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	disk := make([]byte, 3000)
	rand.Read(disk)
	for f, file := range map[nodeimage.Format]struct {
		name string
		data []byte
	}{
		nodeimage.FormatQCOW2: {"disk.qcow2", disk},
		nodeimage.FormatTar:   {"rootfs.tar.gz", gzipOf([]byte("etc/hostname\x00node\n"))},
	} {
		if err := os.WriteFile(filepath.Join(m.Dir, file.name), file.data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(file.data)
		m.Artifacts[f] = nodeimage.Artifact{Path: file.name, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(file.data))}
	}
	return m
}

func gzipOf(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return out.Bytes()
}

// packSmall packs smallImage in both its formats.
func packSmall(t testing.TB) *Packed {
	t.Helper()
	m := smallImage(t)
	p, err := Pack(context.Background(), m, PackOptions{CacheDir: filepath.Dir(filepath.Dir(m.Dir)), Formats: []nodeimage.Format{nodeimage.FormatQCOW2, nodeimage.FormatTar}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// savedSmall returns the archive `hwk node-image save` writes of smallImage.
func savedSmall(t testing.TB) []byte {
	t.Helper()
	file := filepath.Join(t.TempDir(), "node.tar")
	if err := Save(context.Background(), file, "v1.35.4", packSmall(t), nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// listingMagic starts a fuzz input that is a listing of an archive's
// entries, turned into a tar, rather than the archive itself:
// "== NAME" starts a file whose content is the lines up to the next entry
// ("@" in its name is the content's SHA-256), "=d NAME" is a directory,
// "=s NAME TARGET" and "=h NAME TARGET" links.
const listingMagic = "hwk-layout-listing\n" // Why a listing: checksums and digests then hold, and mutations reach the JSON.

func fuzzLayout(data []byte) []byte { return imagearchivetest.FromListing(listingMagic, data) }

// layoutListing returns the listing of the tar archive b.
func layoutListing(t testing.TB, b []byte) []byte {
	out, err := imagearchivetest.Listing(listingMagic, b, func(name string) bool {
		return strings.HasPrefix(name, "blobs/sha256/")
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// files returns the regular files under dir, relative to it.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			t.Fatalf("a link was made: %s", p)
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzOpenArchive loads an archive as `hwk node-image load` does: open
// it, read its images, unpack every file format into a fresh cache. What
// it writes must stay in the cache, be what the image describes, and a
// failed unpack must leave no image behind.
func FuzzOpenArchive(f *testing.F) {
	saved := savedSmall(f)
	f.Add(saved)
	f.Add(layoutListing(f, saved))
	for _, h := range hostileLayouts(f, saved) {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		work, sentinel := filepath.Join(root, "work"), filepath.Join(root, "sentinel")
		for _, d := range []string{work, sentinel} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(sentinel, "keep"), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(work, "node.tar")
		if err := os.WriteFile(file, fuzzLayout(data), 0o644); err != nil {
			t.Fatal(err)
		}
		cache := filepath.Join(work, "cache")
		defer func() {
			// Nothing outside the cache, whatever happened.
			if got := files(t, root); !slicesSubset(got, "work/node.tar", "work/cache/", "sentinel/keep") {
				t.Fatalf("files outside the cache: %v", got)
			}
			if b, err := os.ReadFile(filepath.Join(sentinel, "keep")); err != nil || string(b) != "keep" {
				t.Fatalf("the sentinel changed: %q, %v", b, err)
			}
		}()
		ctx := context.Background()
		a, err := OpenArchive(ctx, file)
		if err != nil {
			if !strings.Contains(err.Error(), file) {
				t.Fatalf("OpenArchive error does not name the archive: %v", err)
			}
			return
		}
		ims, err := a.Images(ctx)
		if err != nil {
			if !strings.Contains(err.Error(), file) {
				t.Fatalf("Images error does not name the archive: %v", err)
			}
			return
		}
		for _, im := range ims {
			if err := nodeimage.CheckName(im.Manifest.Name); err != nil {
				t.Fatalf("image name: %v", err)
			}
			if err := im.Index.Digest.Validate(); err != nil || im.Index.MediaType != ocispec.MediaTypeImageIndex {
				t.Fatalf("index %+v: %v", im.Index, err)
			}
			var formats []nodeimage.Format
			for _, fm := range im.Formats() {
				if _, ok := im.Manifest.Artifacts[fm]; !ok {
					t.Fatalf("format %s that the image's manifest does not describe", fm)
				}
				if fm != nodeimage.FormatDocker {
					formats = append(formats, fm)
				}
			}
			if len(formats) == 0 {
				continue
			}
			dir := filepath.Join(nodeimage.ImagesDir(cache), im.Manifest.Name)
			_, statErr := os.Stat(dir)
			existed := statErr == nil
			got, err := im.Unpack(ctx, UnpackOptions{CacheDir: cache, Formats: formats})
			if err != nil {
				if _, statErr := os.Stat(dir); !existed && statErr == nil {
					t.Fatalf("a failed unpack (%v) left %s", err, dir)
				}
				continue
			}
			if got.Dir != dir {
				t.Fatalf("unpacked into %s, want %s", got.Dir, dir)
			}
			for _, fm := range formats {
				art := got.Artifacts[fm]
				b, err := os.ReadFile(got.FilePath(fm))
				sum := sha256.Sum256(b)
				if err != nil || hex.EncodeToString(sum[:]) != art.SHA256 || int64(len(b)) != art.Size || filepath.Dir(got.FilePath(fm)) != dir {
					t.Fatalf("%s: %s is not the file the image describes (%v)", fm, got.FilePath(fm), err)
				}
			}
		}
	})
}

// slicesSubset reports whether every path in got is one of want or under a
// want that ends in a slash.
func slicesSubset(got []string, want ...string) bool {
	for _, g := range got {
		ok := false
		for _, w := range want {
			ok = ok || g == w || (strings.HasSuffix(w, "/") && strings.HasPrefix(g, w))
		}
		if !ok {
			return false
		}
	}
	return true
}

// hostileLayouts returns saved with an entry added that leads out of the
// archive or is a link, as raw archives and listings.
func hostileLayouts(t testing.TB, saved []byte) [][]byte {
	var out [][]byte
	for _, h := range []*tar.Header{
		{Name: "../escape", Typeflag: tar.TypeReg},
		{Name: "/abs", Typeflag: tar.TypeReg},
		{Name: "blobs/sha256/x", Linkname: "../../../etc/passwd", Typeflag: tar.TypeSymlink},
		{Name: "blobs/sha256/y", Linkname: "../outside", Typeflag: tar.TypeLink},
	} {
		b := imagearchivetest.WithEntry(saved, "", h, "x")
		out = append(out, b, layoutListing(t, b))
	}
	return out
}

// checkReencoding marshals v, parses that with parse and marshals the
// result: the second marshalling must be the first.
func checkReencoding[T any](t *testing.T, v *T, parse func([]byte) (*T, error)) {
	t.Helper()
	first, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	again, err := parse(first)
	if err != nil {
		t.Fatalf("%s does not parse again: %v", first, err)
	}
	second, err := json.Marshal(again)
	if err != nil || !bytes.Equal(first, second) {
		t.Fatalf("parsed and printed again:\n%s\nfirst:\n%s", second, first)
	}
}

func FuzzParseIndex(f *testing.F) {
	p := packSmall(f)
	f.Add(p.index, ocispec.MediaTypeImageIndex)
	f.Add(p.index, "")
	for _, b := range p.blobs {
		if b.desc.MediaType == ocispec.MediaTypeImageManifest {
			f.Add(b.data, ocispec.MediaTypeImageManifest)
		}
	}
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:`+strings.Repeat("0", 64)+`","size":1,"platform":{"architecture":"arm64","os":"linux"}}]}`), "")
	f.Fuzz(func(t *testing.T, data []byte, mediaType string) {
		idx, err := parseIndex(data, mediaType)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "not an OCI image index: ") && !strings.HasPrefix(err.Error(), "it is a ") {
				t.Fatalf("unclear error %v", err)
			}
			return
		}
		if mediaType != ocispec.MediaTypeImageIndex && idx.MediaType != ocispec.MediaTypeImageIndex {
			t.Fatalf("took a %q (%q) for an index", mediaType, idx.MediaType)
		}
		checkReencoding(t, idx, func(b []byte) (*ocispec.Index, error) { return parseIndex(b, "") })
		image, formats, archs := entries(idx, imageArch)
		seen := map[string]bool{}
		for _, a := range archs {
			if a == "" || seen[a] {
				t.Fatalf("architectures %q", archs)
			}
			seen[a] = true
		}
		if image != nil && (image.ArtifactType != ArtifactTypeImage || !inIndex(idx, *image)) {
			t.Fatalf("image entry %+v", image)
		}
		for fm, d := range formats {
			if d.Annotations[AnnotationFormat] != string(fm) || !inIndex(idx, d) || !seen[imageArch] {
				t.Fatalf("format %s: entry %+v", fm, d)
			}
		}
	})
}

func inIndex(idx *ocispec.Index, d ocispec.Descriptor) bool {
	for _, m := range idx.Manifests {
		if reflect.DeepEqual(m, d) {
			return true
		}
	}
	return false
}

func FuzzParseManifest(f *testing.F) {
	p := packSmall(f)
	for _, b := range p.blobs {
		if b.desc.MediaType == ocispec.MediaTypeImageManifest {
			f.Add(b.data)
		}
	}
	f.Add(p.index)
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":{},"layers":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseManifest(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "not an OCI manifest: ") && !strings.HasPrefix(err.Error(), "manifest media type ") {
				t.Fatalf("unclear error %v", err)
			}
			return
		}
		if m.MediaType != ocispec.MediaTypeImageManifest {
			t.Fatalf("took a %q for a manifest", m.MediaType)
		}
		checkReencoding(t, m, parseManifest)
	})
}

func FuzzParsePins(f *testing.F) {
	f.Add(nodeimages.Published)
	if set, err := SetPin(nodeimages.Published, "v1.35.4", testDigest); err == nil {
		f.Add(set)
	}
	f.Add([]byte("registry: ghcr.io/hwk-dev\nrepository: node\nimages:\n  - kubernetesVersion: v1.35.4\n    digest: " + testDigest + "\n  - kubernetesVersion: v1.36.0\n    digest: \"\"\n"))
	f.Add([]byte("registry: 127.0.0.1:5000/hwk\nrepository: node\nimages: []\n"))
	f.Add([]byte("registry: ghcr.io\nrepository: x\nimages: [{kubernetesVersion: v1, digest: sha256:abc}]\nextra: 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePins(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "node image pins: ") {
				t.Fatalf("unclear error %v", err)
			}
			return
		}
		for _, im := range p.Images {
			if im.Digest == "" {
				continue
			}
			ref, err := p.Ref(im.KubernetesVersion, "")
			if err != nil {
				// A version that is not a tag makes no reference.
				if !strings.Contains(err.Error(), "images.registry") {
					t.Fatalf("Ref(%s): %v", im.KubernetesVersion, err)
				}
				continue
			}
			if _, err := registry.ParseReference(ref); err != nil {
				t.Fatalf("Ref(%s) = %s, which does not parse: %v", im.KubernetesVersion, ref, err)
			}
		}
		// Pinning a version anew keeps every other pin and comment.
		version := "v1.35.9"
		if len(p.Images) > 0 {
			version = p.Images[0].KubernetesVersion
		}
		out, err := SetPin(data, version, testDigest)
		if err != nil {
			return
		}
		q, err := ParsePins(out)
		if err != nil {
			t.Fatalf("SetPin wrote pins that do not parse: %v\n%s", err, out)
		}
		want := *p
		want.Images = nil
		found := false
		for _, im := range p.Images {
			if im.KubernetesVersion == version {
				im.Digest, found = testDigest, true
			}
			want.Images = append(want.Images, im)
		}
		if !found {
			want.Images = append(want.Images, Pin{KubernetesVersion: version, Digest: testDigest})
		}
		if !reflect.DeepEqual(q, &want) {
			t.Fatalf("SetPin(%s) made\n%+v\nwant\n%+v", version, q, &want)
		}
	})
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{
		"hwkdev/node:v1.35.4", "ghcr.io/hwk-dev/node:v1.35.4", "ghcr.io/hwk-dev/node@" + testDigest,
		"ghcr.io/hwk-dev/node:v1.35.4@" + testDigest, "127.0.0.1:5000/hwk/node:v1", "localhost:5000/a/b/c:tag",
		"node", "Node:v1", "ghcr.io/hwk-dev/node:", "[::1]:5000/node:v1", "registry.example.com/m/node:v1.35.4",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := ParseRef(s)
		if err != nil {
			if !strings.Contains(err.Error(), "is not an image reference") && !strings.Contains(err.Error(), "names no tag or digest") {
				t.Fatalf("unclear error %v", err)
			}
			return
		}
		if ref.Registry == "" || ref.Repository == "" || ref.Reference == "" {
			t.Fatalf("ParseRef(%q) = %+v", s, ref)
		}
		if _, err := digest.Parse(ref.Reference); err != nil && strings.ContainsAny(ref.Reference, "@:/") {
			t.Fatalf("ParseRef(%q): reference %q", s, ref.Reference)
		}
		again, err := ParseRef(ref.String())
		if err != nil || again != ref {
			t.Fatalf("ParseRef(%q) = %+v; %q parses as %+v, %v", s, ref, ref.String(), again, err)
		}
	})
}

// TestZstdWindowIsBounded checks that a layer whose zstd header asks for a
// 256 MiB window is refused, not allocated before any data arrives.
func TestZstdWindowIsBounded(t *testing.T) {
	m := smallImage(t)
	// A frame: magic, a header asking for a 2^28-byte window, one raw
	// block of one byte.
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 18 << 3, 0x09, 0x00, 0x00, 'x'}
	src := &memSource{blobs: map[digest.Digest][]byte{}, pull: true}
	im := memImage(t, src, m, map[nodeimage.Format][]byte{nodeimage.FormatQCOW2: frame})
	_, err := im.Unpack(context.Background(), UnpackOptions{CacheDir: t.TempDir(), Formats: []nodeimage.Format{nodeimage.FormatQCOW2}})
	var de *DigestError
	if err == nil || errors.As(err, &de) || !strings.Contains(err.Error(), "window over 128 MiB") {
		t.Fatalf("Unpack = %v, want the window refused", err)
	}
}

// TestSetPinWithoutADigestKey checks that SetPin pins a version listed
// without a digest key, keeping its comment.
func TestSetPinWithoutADigestKey(t *testing.T) {
	// Why: such a version once made SetPin dereference the missing key's
	// node.
	data := []byte("registry: ghcr.io/hwk-dev\nrepository: node\nimages:\n  # no digest yet\n  - kubernetesVersion: v1.35.4\n")
	out, err := SetPin(data, "v1.35.4", testDigest)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePins(out)
	if err != nil || len(p.Images) != 1 || p.Images[0].Digest != testDigest || !bytes.Contains(out, []byte("# no digest yet")) {
		t.Errorf("SetPin wrote\n%s(%v)", out, err)
	}
}

// TestSetPinThroughAliases checks that SetPin reads the file as the
// decoder does, aliases followed: pinning a version whose digest is an
// alias of another's leaves the other as it was, and pinning the anchor,
// which would leave the alias dangling, is refused.
func TestSetPinThroughAliases(t *testing.T) {
	data := []byte("registry: ghcr.io/hwk-dev\nrepository: node\nimages:\n  - kubernetesVersion: v1.36.0\n    digest: &d \"\"\n  - kubernetesVersion: v1.35.4\n    digest: *d\n")
	out, err := SetPin(data, "v1.35.4", testDigest)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePins(out)
	if err != nil || len(p.Images) != 2 || p.Images[0].Digest != "" || p.Images[1].Digest != testDigest {
		t.Errorf("SetPin wrote\n%s(%+v, %v)", out, p, err)
	}
	if out, err := SetPin(data, "v1.36.0", testDigest); err == nil || !strings.Contains(err.Error(), "set the pin by hand") {
		t.Errorf("SetPin of the anchor = %v\n%s", err, out)
	}
}

// TestSetRepository checks that SetRepository records where the
// publishing workflow pushed, keeping the comments and the pins, and
// refuses what is not REGISTRY/NAME.
func TestSetRepository(t *testing.T) {
	out, err := SetRepository(nodeimages.Published, "127.0.0.1:5123/hwk-dev/node")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePins(out)
	if err != nil || p.Registry != "127.0.0.1:5123/hwk-dev" || p.Repository != "node" {
		t.Fatalf("SetRepository wrote\n%s(%+v, %v)", out, p, err)
	}
	if !bytes.Contains(out, []byte("# The Linux node image each Kubernetes version")) {
		t.Errorf("the comments are gone:\n%s", out)
	}
	orig, _ := ParsePins(nodeimages.Published)
	if len(p.Images) != len(orig.Images) {
		t.Errorf("images %+v, was %+v", p.Images, orig.Images)
	}
	for _, bad := range []string{"node", "ghcr.io/", "/node", "Ghcr.io/UPPER/node"} {
		if out, err := SetRepository(nodeimages.Published, bad); err == nil {
			t.Errorf("SetRepository(%q) wrote\n%s", bad, out)
		}
	}
}
