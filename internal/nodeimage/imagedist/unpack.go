package imagedist

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/moby/moby/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// UnpackOptions say where a pulled or loaded image goes and how.
type UnpackOptions struct {
	// CacheDir is hwk's cache; the image goes to its node-images/NAME and
	// downloads in progress to its blobs/.
	CacheDir string
	// Formats are the formats to unpack; each must be in the image.
	Formats []nodeimage.Format
	// Docker connects to the engine the docker format is loaded into.
	Docker func() (client.APIClient, error)
	// Progress is told how each format's download goes.
	Progress Progress
}

// BlobsDir returns where downloads in progress are kept between runs.
func BlobsDir(cacheDir string) string { return filepath.Join(cacheDir, "blobs", "sha256") }

// Unpack fetches the formats asked for that the cache lacks and puts the
// image into the cache, each file checked against its layer's digest and
// its own checksum (the docker format loaded into the engine and checked
// there). It writes the manifest last: until then, and after any failure,
// the cache holds nothing new except parts of interrupted downloads.
func (im *Image) Unpack(ctx context.Context, o UnpackOptions) (*nodeimage.Manifest, error) {
	formats, err := im.pick(o.Formats)
	if err != nil {
		return nil, err
	}
	m := im.Manifest
	dir := filepath.Join(nodeimage.ImagesDir(o.CacheDir), m.Name)
	lock, err := state.AcquireLock(filepath.Join(o.CacheDir, "locks", "node-image-"+m.Name+".lock"), "node image "+m.Name)
	if err != nil {
		return nil, err
	}
	defer lock.Release()

	existing, err := nodeimage.ReadManifest(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if existing != nil && existing.Key != m.Key {
		existing = nil
	}
	_, statErr := os.Stat(dir)
	made := errors.Is(statErr, fs.ErrNotExist)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok && made {
			os.RemoveAll(dir)
		}
	}()

	u := &unpacker{im: im, o: o, dir: dir, blobs: BlobsDir(o.CacheDir), got: map[nodeimage.Format]nodeimage.Artifact{}}
	var todo []nodeimage.Format
	for _, f := range formats {
		if existing != nil && existing.Has(ctx, f, o.Docker) && sameArtifact(existing.Artifacts[f], m.Artifacts[f], f) {
			continue
		}
		todo = append(todo, f)
	}
	if err := u.run(ctx, todo); err != nil {
		return nil, err
	}

	out := *m
	out.Dir = dir
	out.Artifacts = map[nodeimage.Format]nodeimage.Artifact{}
	for f, a := range m.Artifacts {
		switch {
		case u.got[f] != (nodeimage.Artifact{}):
			out.Artifacts[f] = u.got[f]
		case existing != nil && existing.Has(ctx, f, o.Docker) && sameArtifact(existing.Artifacts[f], a, f):
			out.Artifacts[f] = existing.Artifacts[f]
		}
	}
	if out.Windows != nil && existing != nil && existing.Windows != nil && existing.Windows.AdminPassword != "" {
		// Pulled onto the machine that built it: the password that never
		// left stays.
		w := *out.Windows
		w.AdminPassword = existing.Windows.AdminPassword
		out.Windows = &w
	}
	out.Origin = &nodeimage.Origin{Digest: im.Index.Digest.String(), At: time.Now().UTC().Truncate(time.Second)}
	if im.archive != "" {
		out.Origin.Archive = im.archive
	} else {
		out.Origin.Ref = im.Ref
	}
	if err := out.Write(); err != nil {
		return nil, err
	}
	ok = true
	return &out, nil
}

// sameArtifact reports whether a cached artifact is the one an image
// describes: the same file, or the same engine image.
func sameArtifact(have, want nodeimage.Artifact, f nodeimage.Format) bool {
	if f == nodeimage.FormatDocker {
		return have.DockerImage == want.DockerImage
	}
	return have.SHA256 == want.SHA256 && have.Size == want.Size
}

type unpacker struct {
	im    *Image
	o     UnpackOptions
	dir   string
	blobs string

	mu  sync.Mutex
	got map[nodeimage.Format]nodeimage.Artifact
}

// run unpacks every format at once: each download is mostly waiting on
// the network, and decompression spreads over the cores by itself.
func (u *unpacker) run(ctx context.Context, formats []nodeimage.Format) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(formats))
	var wg sync.WaitGroup
	for i, f := range formats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a nodeimage.Artifact
			var err error
			if f == nodeimage.FormatDocker {
				a, err = u.docker(ctx)
			} else {
				a, err = u.file(ctx, f)
			}
			if err != nil {
				errs[i] = fmt.Errorf("%s format: %w", f, err)
				cancel()
				return
			}
			u.mu.Lock()
			u.got[f] = a
			u.mu.Unlock()
		}()
	}
	wg.Wait()
	// The first failure is the story; the others are its cancellations.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (u *unpacker) progress(name string, total int64) func(int64) {
	if u.o.Progress == nil {
		return nil
	}
	return func(done int64) { u.o.Progress(name, done, total) }
}

// formatManifest reads and checks the artifact manifest of format f.
func (u *unpacker) formatManifest(ctx context.Context, f nodeimage.Format) (ocispec.Descriptor, error) {
	desc := u.im.formats[f]
	data, err := fetchSmall(ctx, u.im.src, desc, string(f)+" manifest")
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	man, err := parseManifest(data)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if man.ArtifactType != artifactType(f) || man.Config.Digest != u.im.config.Digest || len(man.Layers) != 1 || man.Layers[0].MediaType != layerType[f] {
		return ocispec.Descriptor{}, fmt.Errorf("its manifest is not what hwk writes for %s: artifact type %q, %d layers", f, man.ArtifactType, len(man.Layers))
	}
	return man.Layers[0], nil
}

// maxZstdWindow bounds the memory a layer's zstd stream may ask of the
// decompressor, which it allocates as the stream's header asks, before
// any data: hwk compresses with an 8 MiB window, and zstd --long with a
// 128 MiB one.
const maxZstdWindow = 128 << 20

// file downloads and unpacks a file format.
func (u *unpacker) file(ctx context.Context, f nodeimage.Format) (nodeimage.Artifact, error) {
	want := u.im.Manifest.Artifacts[f]
	if want.Path == "" || filepath.Base(want.Path) != want.Path || want.Path == "." || want.Path == ".." {
		return nodeimage.Artifact{}, fmt.Errorf("the image's manifest names its file %q, which is not a plain file name", want.Path)
	}
	layer, err := u.formatManifest(ctx, f)
	if err != nil {
		return nodeimage.Artifact{}, err
	}
	if layer.Annotations[AnnotationFileSHA256] != want.SHA256 || layer.Annotations[AnnotationFileSize] != strconv.FormatInt(want.Size, 10) {
		return nodeimage.Artifact{}, fmt.Errorf("its layer describes a file (%s, %s bytes) other than the image's manifest does (%s, %d bytes)",
			layer.Annotations[AnnotationFileSHA256], layer.Annotations[AnnotationFileSize], want.SHA256, want.Size)
	}
	final := filepath.Join(u.dir, want.Path)
	tmp := final + ".download"
	defer os.Remove(tmp)
	consume := func(r io.Reader) error {
		out, err := os.Create(tmp)
		if err != nil {
			return err
		}
		defer out.Close()
		src := r
		if compressed(f) {
			zr, err := zstd.NewReader(r, zstd.WithDecoderMaxWindow(maxZstdWindow))
			if err != nil {
				return err
			}
			defer zr.Close()
			src = zr
		}
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(out, h), src)
		if errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return fmt.Errorf("its layer is zstd with a window over %d MiB, which hwk does not decompress (hwk's own use 8 MiB): %w", maxZstdWindow>>20, err)
		}
		if err != nil {
			return err
		}
		if got := hex.EncodeToString(h.Sum(nil)); n != want.Size || got != want.SHA256 {
			return fmt.Errorf("%s unpacked to %d bytes with SHA-256 %s, but the image says %d bytes with %s", want.Path, n, got, want.Size, want.SHA256)
		}
		return out.Close()
	}
	if _, err := download(ctx, u.im.src, layer, u.blobs, string(f)+" layer "+layer.Digest.String(), false, u.progress(string(f), layer.Size), consume); err != nil {
		return nodeimage.Artifact{}, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return nodeimage.Artifact{}, err
	}
	return want, nil
}
