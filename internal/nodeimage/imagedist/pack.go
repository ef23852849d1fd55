package imagedist

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
	"github.com/moby/moby/client"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// blob is one piece of OCI content: small ones in memory, large ones in
// a file.
type blob struct {
	desc ocispec.Descriptor
	data []byte
	path string
	// format is the node image format the blob is the content of, for
	// progress ("" for manifests and configs).
	format nodeimage.Format
}

func (b blob) open() (io.ReadCloser, error) {
	if b.path == "" {
		return io.NopCloser(bytes.NewReader(b.data)), nil
	}
	return os.Open(b.path)
}

// Packed is a node image made into OCI content, ready to push or save.
// Close removes the compressed files it made.
type Packed struct {
	// Manifest is the image's manifest as the index carries it: its
	// artifacts are the formats packed.
	Manifest *nodeimage.Manifest
	// Index is the OCI image index; Sizes the packed size of each format.
	Index ocispec.Descriptor
	Sizes map[nodeimage.Format]int64

	index []byte
	// blobs in the order they can be pushed: every blob before the
	// manifests that name it.
	blobs []blob
	work  string
}

// Close removes the packed files.
func (p *Packed) Close() error { return os.RemoveAll(p.work) }

// PackOptions say what to pack and how to report it.
type PackOptions struct {
	// CacheDir is hwk's cache; compressed files are made in its blobs/.
	CacheDir string
	// Formats to pack; each must be in the image.
	Formats []nodeimage.Format
	// Docker connects to the engine that holds the docker format.
	Docker func() (client.APIClient, error)
	// Step reports each format's packing as a step; nil runs quietly.
	Step func(name string, fn func() error) error
	// Progress is told how each format's packing goes (bytes read).
	Progress Progress
}

// Pack makes the OCI content of the cached image m in the chosen formats:
// every file checked against the SHA-256 its manifest recorded, disks
// compressed with zstd, the docker format taken from the engine.
func Pack(ctx context.Context, m *nodeimage.Manifest, o PackOptions) (_ *Packed, err error) {
	for _, f := range o.Formats {
		if _, ok := m.Artifacts[f]; !ok {
			return nil, fmt.Errorf("node image %s has no %s format; it has %s", m.Name, f, nodeimage.JoinFormats(m.FormatsOf()))
		}
	}
	if len(o.Formats) == 0 {
		return nil, fmt.Errorf("no formats to pack")
	}
	step := o.Step
	if step == nil {
		step = func(_ string, fn func() error) error { return fn() }
	}
	if err := os.MkdirAll(filepath.Join(o.CacheDir, "blobs"), 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(filepath.Join(o.CacheDir, "blobs"), "pack-")
	if err != nil {
		return nil, err
	}
	p := &Packed{work: work, Sizes: map[nodeimage.Format]int64{}}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()

	// The index's copy of the manifest: no secrets, only the formats in
	// it, no record of where this cache got it.
	cm := *m.Public()
	cm.Artifacts = map[nodeimage.Format]nodeimage.Artifact{}
	for _, f := range o.Formats {
		cm.Artifacts[f] = m.Artifacts[f]
	}
	cdata, err := cm.Marshal()
	if err != nil {
		return nil, err
	}
	p.Manifest = &cm
	config := blob{desc: describe(MediaTypeConfig, cdata), data: cdata}
	p.blobs = append(p.blobs, config, blob{desc: emptyDescriptor, data: emptyJSON})
	imgAnn := imageAnnotations(m)

	var manifests []ocispec.Descriptor
	for _, f := range o.Formats {
		a := m.Artifacts[f]
		prog := func(int64) {}
		if o.Progress != nil {
			total := a.Size
			prog = func(n int64) { o.Progress(string(f), n, total) }
		}
		if f == nodeimage.FormatDocker {
			var man blob
			var rest []blob
			err := step(fmt.Sprintf("Exporting %s from the Docker engine", a.DockerImage), func() error {
				if o.Docker == nil {
					return fmt.Errorf("the docker format is in a Docker engine, and none is set up")
				}
				c, err := o.Docker()
				if err != nil {
					return err
				}
				man, rest, err = exportDocker(ctx, c, a.DockerImage, work, prog)
				if err != nil {
					return err
				}
				var cfg ocispec.Image
				if err := json.Unmarshal(rest[0].data, &cfg); err != nil {
					return err
				}
				if cfg.Config.Labels[nodeimage.LabelKey] != m.Key {
					return fmt.Errorf("the engine's %s is another build than node image %s (its %s label is %q); rebuild the image", a.DockerImage, m.Name, nodeimage.LabelKey, cfg.Config.Labels[nodeimage.LabelKey])
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			var size int64
			for i := range rest[1:] { // the layers; rest[0] is the config
				rest[i+1].format = f
				size += rest[i+1].desc.Size
			}
			p.blobs = append(p.blobs, rest...)
			p.blobs = append(p.blobs, man)
			p.Sizes[f] = size
			d := man.desc
			// Why: an ordinary container image, so that `docker pull` of
			// the same reference works.
			d.Platform = &ocispec.Platform{OS: "linux", Architecture: imageArch}
			d.Annotations = merge(imgAnn, map[string]string{AnnotationFormat: string(f)})
			manifests = append(manifests, d)
			continue
		}
		var layer blob
		verb := "Compressing"
		if !compressed(f) {
			verb = "Checking"
		}
		err := step(fmt.Sprintf("%s %s (%s)", verb, a.Path, ui.Size(a.Size)), func() error {
			var err error
			layer, err = packFile(ctx, m.FilePath(f), a, f, work, prog)
			return err
		})
		if err != nil {
			return nil, err
		}
		p.Sizes[f] = layer.desc.Size
		ann := merge(imgAnn, map[string]string{AnnotationFormat: string(f)})
		mdata, err := artifactManifest(artifactType(f), config.desc, layer.desc, ann)
		if err != nil {
			return nil, err
		}
		man := blob{desc: describe(ocispec.MediaTypeImageManifest, mdata), data: mdata}
		p.blobs = append(p.blobs, layer, man)
		d := man.desc
		// Why no platform: so that container runtimes never choose it.
		d.ArtifactType = artifactType(f)
		d.Annotations = merge(ann, fileAnnotations(a))
		delete(d.Annotations, ocispec.AnnotationTitle)
		manifests = append(manifests, d)
	}

	// Why: a manifest carrying only the node image's own manifest, so that
	// any pull can learn what the image is, whatever formats it asks for.
	idata, err := artifactManifest(ArtifactTypeImage, config.desc, emptyDescriptor, imgAnn)
	if err != nil {
		return nil, err
	}
	img := blob{desc: describe(ocispec.MediaTypeImageManifest, idata), data: idata}
	p.blobs = append(p.blobs, img)
	d := img.desc
	d.ArtifactType = ArtifactTypeImage
	d.Annotations = imgAnn
	// The image's own manifest first: it is what a pull reads first.
	manifests = append([]ocispec.Descriptor{d}, manifests...)

	idx := ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: manifests,
		Annotations: map[string]string{
			AnnotationName:              m.Name,
			AnnotationOS:                m.OS,
			AnnotationKubernetesVersion: m.KubernetesVersion,
			AnnotationSource:            string(m.Source),
			ocispec.AnnotationCreated:   m.Built.UTC().Format("2006-01-02T15:04:05Z"),
			ocispec.AnnotationVersion:   m.KubernetesVersion,
		},
	}
	p.index, err = json.Marshal(idx)
	if err != nil {
		return nil, err
	}
	p.Index = describe(ocispec.MediaTypeImageIndex, p.index)
	return p, nil
}

// packFile makes a file format's layer: the file zstd-compressed into
// work (or, for a format that goes as it is, the cached file itself),
// checking the file against the SHA-256 the image recorded as it reads.
func packFile(ctx context.Context, src string, a nodeimage.Artifact, f nodeimage.Format, work string, progress func(int64)) (blob, error) {
	in, err := os.Open(src)
	if err != nil {
		return blob{}, fmt.Errorf("%s format: %w", f, err)
	}
	defer in.Close()
	fileHash := sha256.New()
	r := &countingReader{r: io.TeeReader(ctxReader{ctx, in}, fileHash), progress: progress}
	layer := blob{path: src, format: f}
	var outHash = fileHash
	var size int64
	if compressed(f) {
		out, err := os.CreateTemp(work, string(f)+"-*.zst")
		if err != nil {
			return blob{}, err
		}
		defer out.Close()
		outHash = sha256.New()
		cw := &countingWriter{w: io.MultiWriter(out, outHash)}
		zw, err := zstd.NewWriter(cw, zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			return blob{}, err
		}
		if _, err := io.Copy(zw, r); err != nil {
			zw.Close()
			return blob{}, fmt.Errorf("compress %s: %w", src, err)
		}
		if err := zw.Close(); err != nil {
			return blob{}, err
		}
		if err := out.Close(); err != nil {
			return blob{}, err
		}
		layer.path, size = out.Name(), cw.n
	} else {
		if _, err := io.Copy(io.Discard, r); err != nil {
			return blob{}, err
		}
		size = r.n
	}
	if got := hex.EncodeToString(fileHash.Sum(nil)); got != a.SHA256 || r.n != a.Size {
		return blob{}, fmt.Errorf("%s is not the file the image was built with (SHA-256 %s, %d bytes; its manifest says %s, %d bytes); rebuild the image", src, got, r.n, a.SHA256, a.Size)
	}
	layer.desc = ocispec.Descriptor{
		MediaType:   layerType[f],
		Digest:      digest.NewDigest(digest.SHA256, outHash),
		Size:        size,
		Annotations: merge(fileAnnotations(a), map[string]string{AnnotationFormat: string(f)}),
	}
	return layer, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ctxReader stops a long read when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
