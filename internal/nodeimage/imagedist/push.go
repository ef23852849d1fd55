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

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Push uploads the packed image to refStr, which must name a tag, and
// returns the index's digest. Blobs the repository has already are not
// sent again.
func (r *Registry) Push(ctx context.Context, refStr string, p *Packed, progress Progress) (digest.Digest, error) {
	ref, err := ParseRef(refStr)
	if err != nil {
		return "", err
	}
	tag := tagOf(refStr)
	if tag == "" || ref.Reference != tag {
		return "", fmt.Errorf("%q: push to a tag (e.g. :%s), not a digest: the digest is the result", refStr, p.Manifest.KubernetesVersion)
	}
	repo, err := r.repository(ctx, ref)
	if err != nil {
		return "", err
	}
	seen := map[digest.Digest]bool{}
	for _, b := range p.blobs {
		if seen[b.desc.Digest] {
			continue
		}
		seen[b.desc.Digest] = true
		exists, err := repo.Exists(ctx, b.desc)
		if err != nil {
			return "", r.explain(ref, err)
		}
		if exists {
			if progress != nil && b.format != "" {
				progress(string(b.format), b.desc.Size, b.desc.Size)
			}
			continue
		}
		rc, err := b.open()
		if err != nil {
			return "", err
		}
		var in io.Reader = rc
		if progress != nil && b.format != "" {
			f, total := string(b.format), b.desc.Size
			in = &countingReader{r: rc, progress: func(n int64) { progress(f, n, total) }}
		}
		err = repo.Push(ctx, b.desc, in)
		rc.Close()
		if err != nil {
			return "", r.explain(ref, fmt.Errorf("push %s: %w", b.desc.Digest, err))
		}
	}
	if err := repo.PushReference(ctx, p.Index, bytes.NewReader(p.index), tag); err != nil {
		return "", r.explain(ref, fmt.Errorf("push the index: %w", err))
	}
	return p.Index.Digest, nil
}

// Save writes the packed image to file as an OCI image layout in a tar
// (what Load and `oras`/`skopeo` read), tagged tag. The file appears only
// once complete.
func Save(ctx context.Context, file, tag string, p *Packed, progress Progress) error {
	dir := filepath.Dir(file)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(file)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := writeLayout(ctx, tmp, tag, p, progress); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

func writeLayout(ctx context.Context, w io.Writer, tag string, p *Packed, progress Progress) error {
	tw := tar.NewWriter(w)
	layout, err := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err != nil {
		return err
	}
	top := p.Index
	top.Annotations = map[string]string{ocispec.AnnotationRefName: tag}
	index, err := json.Marshal(ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{top},
	})
	if err != nil {
		return err
	}
	// Small things first, so a reader that streams finds the manifests
	// before the layers.
	files := []blob{
		{desc: ocispec.Descriptor{Size: int64(len(layout))}, data: layout},
		{desc: ocispec.Descriptor{Size: int64(len(index))}, data: index},
		{desc: p.Index, data: p.index},
	}
	names := []string{ocispec.ImageLayoutFile, ocispec.ImageIndexFile, blobPath(p.Index.Digest)}
	seen := map[digest.Digest]bool{p.Index.Digest: true}
	for _, small := range []bool{true, false} {
		for _, b := range p.blobs {
			if (b.path == "") != small || seen[b.desc.Digest] {
				continue
			}
			seen[b.desc.Digest] = true
			files = append(files, b)
			names = append(names, blobPath(b.desc.Digest))
		}
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
			return err
		}
	}
	for i, b := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: names[i], Mode: 0o644, Size: b.desc.Size, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		rc, err := b.open()
		if err != nil {
			return err
		}
		var in io.Reader = rc
		if progress != nil && b.format != "" {
			f, total := string(b.format), b.desc.Size
			in = &countingReader{r: rc, progress: func(n int64) { progress(f, n, total) }}
		}
		n, err := io.Copy(tw, in)
		rc.Close()
		if err != nil {
			return err
		}
		if n != b.desc.Size {
			return fmt.Errorf("%s changed while it was saved (%d bytes, want %d)", names[i], n, b.desc.Size)
		}
	}
	return tw.Close()
}

func blobPath(d digest.Digest) string { return "blobs/" + d.Algorithm().String() + "/" + d.Encoded() }
