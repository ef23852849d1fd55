// Package imagearchive reads container image archives — what `docker save`
// writes, in its classic layout and in the OCI layout of Docker 25 and
// later, and OCI image layouts packed in a tar — and writes, for one node,
// an archive holding only the images and platforms that node needs. It
// also knows which platforms a node can run (Runs, Best).
package imagearchive

import "fmt"

// Media types hwk reads and writes.
const (
	mediaOCIIndex       = "application/vnd.oci.image.index.v1+json"
	mediaOCIManifest    = "application/vnd.oci.image.manifest.v1+json"
	mediaOCIConfig      = "application/vnd.oci.image.config.v1+json"
	mediaDockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
	mediaDockerConfig   = "application/vnd.docker.container.image.v1+json"
	mediaLayerTar       = "application/vnd.oci.image.layer.v1.tar"
	mediaLayerGzip      = "application/vnd.oci.image.layer.v1.tar+gzip"
	mediaLayerZstd      = "application/vnd.oci.image.layer.v1.tar+zstd"

	// annotationName is the full reference containerd names an image by
	// on import; annotationRefName is OCI's, often only a tag.
	annotationName    = "io.containerd.image.name"
	annotationRefName = "org.opencontainers.image.ref.name"
)

// smallEntry bounds the entries Scan keeps in memory: manifests, indexes
// and configs are far smaller; layers are read through.
const smallEntry = 4 << 20

// Limits on what an archive may make Scan hold and do: a crafted one fails
// with a FormatError instead of exhausting memory or time.
const (
	// maxMetadata bounds the JSON entries kept in memory all together.
	maxMetadata = 64 << 20
	// maxListed bounds the manifests, layers and names an archive's
	// indexes and manifests list, each counted once per listing: an index
	// that lists another index many times pays for each.
	maxListed = 1 << 16
)

// Archive is what Scan found in an image archive.
type Archive struct {
	Images []Image
	// Bytes is the size of every entry in the archive.
	Bytes int64
	// entries are the archive's regular files (symlinks resolved) by name.
	entries map[string]*entry
	// blobs are OCI-style blobs by digest, whatever the entry's name.
	blobs map[string]*entry
	// listed counts what the indexes and manifests list, against
	// maxListed; configs, manifests and indexes are parsed once each.
	listed  int
	configs map[string]*imageConfig
	parsed  map[string]*manifest
	indexes map[string]*index
}

// Image is one image of an archive: one name or several for the same
// content, and the platforms it is built for.
type Image struct {
	// Refs are the image's names, fully qualified
	// (docker.io/library/busybox:1.37); empty for an image the archive
	// does not name.
	Refs []string
	// Digest is what the archive names the image by: the index or
	// manifest digest in an OCI layout, the config digest (the image ID)
	// in a classic docker save.
	Digest string
	// Manifests are the image's platforms, in the archive's order.
	Manifests []Manifest
}

// Name returns how messages call the image: its first name, else its digest.
func (im Image) Name() string {
	if len(im.Refs) > 0 {
		return im.Refs[0]
	}
	return im.Digest
}

// Platforms lists the platforms the image is built for.
func (im Image) Platforms() []Platform {
	ps := make([]Platform, len(im.Manifests))
	for i, m := range im.Manifests {
		ps[i] = m.Platform
	}
	return ps
}

// Manifest is one platform of an image.
type Manifest struct {
	Platform Platform
	// Config is the config's digest: the image ID crictl reports once
	// the image is in a node's containerd.
	Config string
	// Digest is the manifest's digest. hwk makes the manifest of a
	// classic docker-save image itself, so it is set there too.
	Digest string
	// Bytes is the size of the manifest's config and layers.
	Bytes int64
	// Missing names a blob the manifest needs that the archive lacks
	// (Docker's containerd store exports indexes whose other platforms
	// it never pulled); such a manifest cannot be loaded.
	Missing string

	// Layers are the image's layers, base first.
	Layers []Layer

	mediaType string
	raw       []byte // the manifest's JSON
	// blobs are the digests of the config and layers.
	blobs []string
}

// Layer is one layer of a manifest: its blob (compressed or not) and
// the digest of its uncompressed content, the config's diff ID ("" when
// the archive lacks the config).
type Layer struct {
	Digest string
	DiffID string
	Size   int64
}

// entry is one file of the archive.
type entry struct {
	name   string
	size   int64
	digest string // sha256:..., of the content
	head   []byte // the first bytes, to tell compressed layers
	data   []byte // the content, when small
}

// FormatError is an archive that is not a readable image archive.
type FormatError struct{ Reason string }

func (e *FormatError) Error() string { return e.Reason }

func formatErr(format string, a ...any) error { return &FormatError{Reason: fmt.Sprintf(format, a...)} }
