package imagedist

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"

	"github.com/distribution/reference"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// dockerManifestEntry is one image of a `docker save` archive's
// manifest.json (in Docker's classic layout and in Docker 25's OCI one).
type dockerManifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// bigFile is the size above which a file of a `docker save` stream goes
// to disk rather than memory.
const bigFile = 1 << 20

// exportDocker takes the docker format's image out of the engine as an
// ordinary OCI image: its config as the engine has it (so the image keeps
// its ID), each layer gzip-compressed (what every Docker since 1.x can
// pull). It reads one `docker save` stream, sending big files to work as
// they pass.
func exportDocker(ctx context.Context, c client.APIClient, tag, work string, progress func(int64)) (manifest blob, rest []blob, err error) {
	rc, err := c.ImageSave(ctx, []string{tag})
	if err != nil {
		return blob{}, nil, fmt.Errorf("docker save %s: %w", tag, err)
	}
	defer rc.Close()
	small := map[string][]byte{}
	big := map[string]string{}
	tr := tar.NewReader(&countingReader{r: rc, progress: progress})
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return blob{}, nil, fmt.Errorf("docker save %s: %w", tag, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Clean(h.Name)
		if h.Size < bigFile {
			data, err := io.ReadAll(tr)
			if err != nil {
				return blob{}, nil, err
			}
			small[name] = data
			continue
		}
		f, err := os.CreateTemp(work, "save-*")
		if err != nil {
			return blob{}, nil, err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return blob{}, nil, fmt.Errorf("docker save %s: %w", tag, err)
		}
		big[name] = f.Name()
	}
	var entries []dockerManifestEntry
	if err := json.Unmarshal(small["manifest.json"], &entries); err != nil || len(entries) != 1 {
		return blob{}, nil, fmt.Errorf("docker save %s: its manifest.json is not one image (%v)", tag, err)
	}
	e := entries[0]
	cfgData, ok := small[path.Clean(e.Config)]
	if !ok {
		return blob{}, nil, fmt.Errorf("docker save %s: no config %s", tag, e.Config)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(cfgData, &cfg); err != nil {
		return blob{}, nil, fmt.Errorf("docker save %s: config: %w", tag, err)
	}
	if len(cfg.RootFS.DiffIDs) != len(e.Layers) {
		return blob{}, nil, fmt.Errorf("docker save %s: %d layers for %d diff IDs", tag, len(e.Layers), len(cfg.RootFS.DiffIDs))
	}
	config := blob{desc: describe(ocispec.MediaTypeImageConfig, cfgData), data: cfgData}
	layers := make([]blob, len(e.Layers))
	for i, l := range e.Layers {
		l = path.Clean(l)
		var in io.Reader
		if data, ok := small[l]; ok {
			in = bytes.NewReader(data)
		} else if p, ok := big[l]; ok {
			f, err := os.Open(p)
			if err != nil {
				return blob{}, nil, err
			}
			defer f.Close()
			in = f
		} else {
			return blob{}, nil, fmt.Errorf("docker save %s: no layer %s", tag, l)
		}
		layers[i], err = gzipLayer(in, cfg.RootFS.DiffIDs[i], work)
		if err != nil {
			return blob{}, nil, fmt.Errorf("docker save %s: layer %d: %w", tag, i, err)
		}
		if p, ok := big[l]; ok {
			os.Remove(p)
		}
	}
	man := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    config.desc,
	}
	for _, l := range layers {
		man.Layers = append(man.Layers, l.desc)
	}
	data, err := json.Marshal(man)
	if err != nil {
		return blob{}, nil, err
	}
	return blob{desc: describe(ocispec.MediaTypeImageManifest, data), data: data}, append([]blob{config}, layers...), nil
}

// gzipLayer writes one layer of a save, as gzip, to a file in work,
// checking that it is the layer the config's diff ID names. A layer the
// engine already keeps compressed (Docker's containerd store) is
// uncompressed to check it, and compressed again the same way as any.
func gzipLayer(in io.Reader, diffID digest.Digest, work string) (blob, error) {
	br := bufio.NewReader(in)
	head, _ := br.Peek(4)
	var plain io.Reader = br
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return blob{}, err
		}
		defer zr.Close()
		plain = zr
	case bytes.HasPrefix(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br)
		if err != nil {
			return blob{}, err
		}
		defer zr.Close()
		plain = zr
	}
	f, err := os.CreateTemp(work, "layer-*.tar.gz")
	if err != nil {
		return blob{}, err
	}
	defer f.Close()
	outHash := sha256.New()
	zw, err := gzip.NewWriterLevel(io.MultiWriter(f, outHash), gzip.DefaultCompression)
	if err != nil {
		return blob{}, err
	}
	inHash := sha256.New()
	if _, err := io.Copy(zw, io.TeeReader(plain, inHash)); err != nil {
		return blob{}, err
	}
	if err := zw.Close(); err != nil {
		return blob{}, err
	}
	if got := digest.NewDigest(digest.SHA256, inHash); got != diffID {
		return blob{}, fmt.Errorf("content is %s, its config says %s", got, diffID)
	}
	st, err := f.Stat()
	if err != nil {
		return blob{}, err
	}
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: digest.NewDigest(digest.SHA256, outHash), Size: st.Size()}
	return blob{desc: desc, path: f.Name()}, f.Close()
}

// docker downloads the docker format's image and loads it into the
// engine under the tag the docker driver looks for, then checks the
// engine holds exactly that image.
func (u *unpacker) docker(ctx context.Context) (nodeimage.Artifact, error) {
	want := u.im.Manifest.Artifacts[nodeimage.FormatDocker]
	named, err := reference.ParseNormalizedNamed(want.DockerImage)
	if _, tagged := named.(reference.Tagged); err != nil || !tagged {
		return nodeimage.Artifact{}, fmt.Errorf("the image's manifest names its engine image %q, which is not a tagged image name", want.DockerImage)
	}
	if u.o.Docker == nil {
		return nodeimage.Artifact{}, errors.New("it goes into a Docker engine, and none is set up")
	}
	c, err := u.o.Docker()
	if err != nil {
		return nodeimage.Artifact{}, fmt.Errorf("it goes into a Docker engine: %w", err)
	}
	desc := u.im.formats[nodeimage.FormatDocker]
	data, err := fetchSmall(ctx, u.im.src, desc, "docker image manifest")
	if err != nil {
		return nodeimage.Artifact{}, err
	}
	man, err := parseManifest(data)
	if err != nil {
		return nodeimage.Artifact{}, err
	}
	cfgData, err := fetchSmall(ctx, u.im.src, man.Config, "docker image config")
	if err != nil {
		return nodeimage.Artifact{}, err
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(cfgData, &cfg); err != nil {
		return nodeimage.Artifact{}, fmt.Errorf("docker image config: %w", err)
	}
	if cfg.Config.Labels[nodeimage.LabelKey] != u.im.Manifest.Key || len(cfg.RootFS.DiffIDs) != len(man.Layers) || len(man.Layers) == 0 {
		return nodeimage.Artifact{}, fmt.Errorf("the container image is not the node image the index describes (label %s=%q, want %q)",
			nodeimage.LabelKey, cfg.Config.Labels[nodeimage.LabelKey], u.im.Manifest.Key)
	}

	var total int64
	for _, l := range man.Layers {
		total += l.Size
	}
	var paths []string
	defer func() {
		for _, p := range paths {
			os.Remove(p)
		}
	}()
	layerProgress := func(i int) func(int64) {
		p := u.progress("docker", total)
		if p == nil {
			return nil
		}
		var base int64
		for _, l := range man.Layers[:i] {
			base += l.Size
		}
		return func(n int64) { p(base + n) }
	}
	// Every layer except the last is downloaded first; the last streams into
	// the engine as it downloads, so that the load overlaps the download
	// (a node image has one layer). Each try of that download is a load
	// of its own: a broken one ends its load unfinished, and the next
	// sends the part on disk again, then the rest.
	last := len(man.Layers) - 1
	for i, l := range man.Layers[:last] {
		p, err := download(ctx, u.im.src, l, u.blobs, fmt.Sprintf("docker layer %d (%s)", i, l.Digest), true, layerProgress(i), nil)
		if err != nil {
			return nodeimage.Artifact{}, err
		}
		paths = append(paths, p)
	}
	load := func(r io.Reader) error {
		return loadIntoEngine(ctx, c, want.DockerImage, cfgData, paths, man.Layers[last], r)
	}
	if _, err := download(ctx, u.im.src, man.Layers[last], u.blobs, fmt.Sprintf("docker layer %d (%s)", last, man.Layers[last].Digest), false, layerProgress(last), load); err != nil {
		return nodeimage.Artifact{}, err
	}
	img, err := c.ImageInspect(ctx, want.DockerImage)
	if err != nil {
		return nodeimage.Artifact{}, fmt.Errorf("inspect %s after loading it: %w", want.DockerImage, err)
	}
	var got []digest.Digest
	if img.RootFS.Type != "" {
		for _, l := range img.RootFS.Layers {
			got = append(got, digest.Digest(l))
		}
	}
	if img.Config == nil || img.Config.Labels[nodeimage.LabelKey] != u.im.Manifest.Key || !slices.Equal(got, cfg.RootFS.DiffIDs) {
		return nodeimage.Artifact{}, fmt.Errorf("the engine's %s is not the image just loaded (layers %v, want %v)", want.DockerImage, got, cfg.RootFS.DiffIDs)
	}
	return nodeimage.Artifact{DockerImage: want.DockerImage, DockerID: img.ID, Size: img.Size}, nil
}

// loadIntoEngine streams a `docker save`-style archive (manifest.json,
// cfg, the gzip layers in files, then the last one from r as it comes)
// into `docker load`. It ends the archive only once that layer matches
// last's digest, so a bad layer's error is returned, not the engine's.
func loadIntoEngine(ctx context.Context, c client.APIClient, tag string, cfg []byte, files []string, last ocispec.Descriptor, r io.Reader) error {
	// Why docker save's format: every engine version reads it. Why end
	// only after the digest: otherwise the engine gets a broken archive
	// and loads nothing.
	pr, pw := io.Pipe()
	var werr error
	written := make(chan struct{})
	go func() {
		defer close(written)
		werr = writeDockerArchive(pw, tag, cfg, files, last, r)
		pw.CloseWithError(werr)
	}()
	err := readLoad(ctx, c, tag, pr)
	pr.CloseWithError(io.ErrClosedPipe) // stops the writer if the engine gave up first
	<-written
	if werr != nil {
		return werr
	}
	return err
}

// readLoad sends an archive to `docker load` and reads its answer.
func readLoad(ctx context.Context, c client.APIClient, tag string, archive io.Reader) error {
	res, err := c.ImageLoad(ctx, archive, client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("docker load %s: %w", tag, err)
	}
	defer res.Close()
	dec := json.NewDecoder(res)
	for {
		var msg jsonstream.Message
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("docker load %s: %w", tag, err)
		}
		if msg.Error != nil {
			return fmt.Errorf("docker load %s: %s", tag, msg.Error.Message)
		}
	}
}

func writeDockerArchive(w io.Writer, tag string, cfg []byte, files []string, last ocispec.Descriptor, r io.Reader) error {
	tw := tar.NewWriter(w)
	entry := dockerManifestEntry{Config: "config.json", RepoTags: []string{tag}}
	for i := range len(files) + 1 {
		entry.Layers = append(entry.Layers, fmt.Sprintf("layer%d.tar.gz", i))
	}
	man, err := json.Marshal([]dockerManifestEntry{entry})
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"manifest.json", man}, {"config.json", cfg}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	for i, p := range files {
		if err := copyFileToTar(tw, entry.Layers[i], p); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: entry.Layers[len(files)], Mode: 0o644, Size: last.Size, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	h := last.Digest.Algorithm().Hash()
	n, err := io.Copy(tw, io.TeeReader(io.LimitReader(r, last.Size), h))
	if err != nil {
		return err
	}
	if got := digest.NewDigest(last.Digest.Algorithm(), h); n != last.Size || got != last.Digest {
		return &DigestError{What: "docker layer " + last.Digest.String(), Want: last.Digest, Got: got, Size: n, WantSize: last.Size}
	}
	return tw.Close()
}

// copyFileToTar writes the file at p into tw as name.
func copyFileToTar(tw *tar.Writer, name, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: st.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// readHead reads the first n bytes of a file (fewer if it is shorter).
func readHead(p string, n int) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	k, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:k], nil
}
