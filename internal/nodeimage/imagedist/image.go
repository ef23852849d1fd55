package imagedist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// Image is a node image in a registry or an archive, read as far as its
// index and its own manifest: enough to say what it is and which formats
// it has, before anything large moves.
type Image struct {
	// Ref is where it is: a reference with its digest, or archive:tag.
	Ref string
	// Index is its OCI image index.
	Index ocispec.Descriptor
	// Manifest is the node image's own manifest (its config blob).
	Manifest *nodeimage.Manifest

	config  ocispec.Descriptor
	formats map[nodeimage.Format]ocispec.Descriptor
	src     source
	archive string
}

// Formats lists the formats the image has for this host's architecture.
func (im *Image) Formats() []nodeimage.Format {
	var out []nodeimage.Format
	for _, f := range nodeimage.Formats {
		if _, ok := im.formats[f]; ok {
			out = append(out, f)
		}
	}
	return out
}

// maxSmall bounds what hwk reads into memory: manifests and configs.
const maxSmall = 8 << 20

// fetchSmall reads a manifest or config whole and checks its digest.
func fetchSmall(ctx context.Context, src source, desc ocispec.Descriptor, what string) ([]byte, error) {
	if desc.Size > maxSmall {
		return nil, fmt.Errorf("%s is %d bytes, more than a manifest or config can be", what, desc.Size)
	}
	if err := desc.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	rc, _, err := src.fetch(ctx, desc, 0)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, desc.Size+1))
	if err != nil {
		return nil, err
	}
	if got := digest.FromBytes(data); int64(len(data)) != desc.Size || got != desc.Digest {
		return nil, &DigestError{What: what, Want: desc.Digest, Got: got, Size: int64(len(data)), WantSize: desc.Size}
	}
	return data, nil
}

// hostArch is the architecture whose entries a pull takes.
var hostArch = runtime.GOARCH

// readImage reads the index at desc and the image's own manifest.
func readImage(ctx context.Context, src source, desc ocispec.Descriptor, name string) (*Image, error) {
	data, err := fetchSmall(ctx, src, desc, name)
	if err != nil {
		return nil, err
	}
	idx, err := parseIndex(data, desc.MediaType)
	if err != nil {
		return nil, fmt.Errorf("%s is not a hwk node image: %w", name, err)
	}
	imageDesc, formats, archs := entries(idx, hostArch)
	if imageDesc == nil {
		if len(archs) > 0 {
			return nil, fmt.Errorf("%s has no node image for %s (it has %s)", name, hostArch, strings.Join(archs, ", "))
		}
		return nil, fmt.Errorf("%s is not a hwk node image: its index has no %s entry", name, ArtifactTypeImage)
	}
	mdata, err := fetchSmall(ctx, src, *imageDesc, name+"'s image manifest")
	if err != nil {
		return nil, err
	}
	man, err := parseManifest(mdata)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if man.Config.MediaType != MediaTypeConfig {
		return nil, fmt.Errorf("%s: its image manifest's config is %q, not %s", name, man.Config.MediaType, MediaTypeConfig)
	}
	cdata, err := fetchSmall(ctx, src, man.Config, name+"'s node image manifest")
	if err != nil {
		return nil, err
	}
	m, err := nodeimage.ParseManifest(cdata)
	if err != nil {
		return nil, fmt.Errorf("%s: its node image manifest: %w", name, err)
	}
	if err := nodeimage.CheckName(m.Name); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for f := range formats {
		if _, ok := m.Artifacts[f]; !ok {
			delete(formats, f) // an entry its own manifest does not describe
		}
	}
	return &Image{Ref: name, Index: desc, Manifest: m, config: man.Config, formats: formats, src: src}, nil
}

// Resolve finds ref (which must have a tag or digest) in its registry and
// reads its index and own manifest. It fails, naming the registry and
// what to do, when the registry cannot be reached or refuses.
func (r *Registry) Resolve(ctx context.Context, refStr string) (*Image, error) {
	ref, err := ParseRef(refStr)
	if err != nil {
		return nil, err
	}
	repo, err := r.repository(ctx, ref)
	if err != nil {
		return nil, err
	}
	src := &remoteSource{reg: r, repo: repo}
	desc, err := repo.Resolve(ctx, ref.Reference)
	if err != nil {
		return nil, r.explain(ref, err)
	}
	name := ref.Registry + "/" + ref.Repository
	if tag := tagOf(refStr); tag != "" {
		name += ":" + tag
	}
	name += "@" + desc.Digest.String()
	im, err := readImage(ctx, src, desc, name)
	if err != nil {
		return nil, r.explain(ref, err)
	}
	return im, nil
}

// tagOf returns the tag of a reference string, or "" if it has none.
func tagOf(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	slash := strings.LastIndex(ref, "/")
	if i := strings.LastIndex(ref, ":"); i > slash {
		return ref[i+1:]
	}
	return ""
}

// remoteSource reads from a registry repository.
type remoteSource struct {
	reg  *Registry
	repo *remote.Repository
}

func (s *remoteSource) fetch(ctx context.Context, desc ocispec.Descriptor, offset int64) (io.ReadCloser, int64, error) {
	if offset > 0 {
		rc, from, err := s.reg.fetchRange(ctx, s.repo, desc, offset)
		return rc, from, s.wrap(err)
	}
	rc, err := s.repo.Fetch(ctx, desc)
	return rc, 0, s.wrap(err)
}

func (s *remoteSource) wrap(err error) error {
	if err == nil {
		return nil
	}
	return s.reg.explain(s.repo.Reference, err)
}

func (s *remoteSource) resumable() bool { return true }

// Archive is an OCI layout archive (what Save writes) opened for Load.
type Archive struct {
	path  string
	store *oci.ReadOnlyStore
}

// OpenArchive opens an OCI image layout in a tar file. It reads the tar's
// table of contents and every manifest, not the layers. An archive with
// an entry that leads outside it, or a link, is refused (see
// checkLayoutArchive).
func OpenArchive(ctx context.Context, path string) (*Archive, error) {
	if err := checkPlainTar(path); err != nil {
		return nil, err
	}
	if err := checkLayoutArchive(path); err != nil {
		return nil, err
	}
	store, err := oci.NewFromTar(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("%s is not an OCI image layout archive (what `hwk node-image save` writes): %w", path, err)
	}
	return &Archive{path: path, store: store}, nil
}

// checkPlainTar refuses a compressed archive with what to do, rather
// than letting the tar reader call it garbage.
func checkPlainTar(path string) error {
	data, err := readHead(path, 4)
	if err != nil {
		return err
	}
	switch {
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		return fmt.Errorf("%s is gzip-compressed; decompress it first (gunzip), hwk reads the plain tar `hwk node-image save` writes", path)
	case bytes.HasPrefix(data, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return fmt.Errorf("%s is zstd-compressed; decompress it first (zstd -d), hwk reads the plain tar `hwk node-image save` writes", path)
	}
	return nil
}

// Images lists the node images of the archive for this host's
// architecture, in the order of its index.
func (a *Archive) Images(ctx context.Context) ([]*Image, error) {
	var tags []string
	if err := a.store.Tags(ctx, "", func(t []string) error { tags = append(tags, t...); return nil }); err != nil {
		return nil, err
	}
	src := &archiveSource{a: a}
	var out []*Image
	seen := map[digest.Digest]bool{}
	for _, t := range tags {
		if _, err := digest.Parse(t); err == nil {
			continue // oras tags every entry by its digest too
		}
		desc, err := a.store.Resolve(ctx, t)
		if err != nil {
			return nil, err
		}
		if desc.MediaType != ocispec.MediaTypeImageIndex || seen[desc.Digest] {
			continue
		}
		seen[desc.Digest] = true
		im, err := readImage(ctx, src, desc, a.path+":"+t)
		if err != nil {
			return nil, err
		}
		im.archive = a.path
		out = append(out, im)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no hwk node image (no tagged OCI index with a %s entry)", a.path, ArtifactTypeImage)
	}
	return out, nil
}

type archiveSource struct{ a *Archive }

func (s *archiveSource) fetch(ctx context.Context, desc ocispec.Descriptor, _ int64) (io.ReadCloser, int64, error) {
	rc, err := s.a.store.Fetch(ctx, desc)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", s.a.path, err)
	}
	return rc, 0, nil
}

func (s *archiveSource) resumable() bool { return false }

// pick checks that every format asked for is in the image, and names
// the ones it has when one is not.
func (im *Image) pick(formats []nodeimage.Format) ([]nodeimage.Format, error) {
	if len(formats) == 0 {
		return nil, errors.New("no formats asked for")
	}
	var missing []string
	for _, f := range formats {
		if _, ok := im.formats[f]; !ok {
			missing = append(missing, string(f))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s has no %s format (it has %s)", im.Ref, strings.Join(missing, ", "), nodeimage.JoinFormats(im.Formats()))
	}
	return slices.Clone(formats), nil
}
