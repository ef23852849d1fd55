// Package imagedist moves node images between hwk's cache and the world as
// OCI content: push to and pull from a registry, save to and load from a
// single OCI layout archive. Pulls resume, check every byte against its
// digest before anything enters the cache, and decompress as they download.
//
// One node image version is one OCI image index (see README, "Node images
// as OCI content", and Pack): the docker format as an ordinary linux/amd64
// container image; per architecture, one artifact manifest with the node
// image's manifest.json as its config, and one per file format with that
// config and the file as its single layer. Artifact entries have no platform.
package imagedist

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// Media and artifact types of hwk's node image content.
const (
	// MediaTypeConfig is a node image's own manifest (what
	// `hwk node-image list` shows), the config of every artifact manifest
	// of the index.
	MediaTypeConfig = "application/vnd.hwk.node-image.config.v1+json"
	// ArtifactTypeImage marks the manifest that carries only that config
	// (its one layer is the empty descriptor).
	ArtifactTypeImage = "application/vnd.hwk.node-image.v1"
	// ArtifactTypeDisk marks a VM disk's manifest, ArtifactTypeRootfs the
	// rootfs tarball's.
	ArtifactTypeDisk   = "application/vnd.hwk.node-image.disk.v1"
	ArtifactTypeRootfs = "application/vnd.hwk.node-image.rootfs.v1"
	// The layers: each disk zstd-compressed, the rootfs tarball as the
	// cache keeps it (already gzip).
	MediaTypeQCOW2  = "application/vnd.hwk.node-image.disk.v1.qcow2+zstd"
	MediaTypeVHDX   = "application/vnd.hwk.node-image.disk.v1.vhdx+zstd"
	MediaTypeVDI    = "application/vnd.hwk.node-image.disk.v1.vdi+zstd"
	MediaTypeRootfs = "application/vnd.hwk.node-image.rootfs.v1.tar+gzip"
)

// Annotations hwk writes on the index, its descriptors and the artifact
// manifests and layers.
const (
	// AnnotationFormat is the node image format of an entry: docker,
	// tar, qcow2, vhdx, vdi.
	AnnotationFormat = "dev.hwk.node-image.format"
	// AnnotationArchitecture is the CPU architecture of an artifact entry,
	// which has no platform (GOARCH terms: amd64, arm64). hwk finds
	// artifact entries by artifactType and annotations.
	AnnotationArchitecture      = "dev.hwk.node-image.architecture"
	AnnotationOS                = "dev.hwk.node-image.os"
	AnnotationName              = "dev.hwk.node-image.name"
	AnnotationKubernetesVersion = "dev.hwk.node-image.kubernetes-version"
	// AnnotationSource is how the image's binaries were made: release or
	// source.
	AnnotationSource = "dev.hwk.node-image.source"
	// AnnotationFileSize and AnnotationFileSHA256 describe the file a
	// layer unpacks to (the disk, uncompressed), so a pull checks the
	// result as well as the download.
	AnnotationFileSize   = "dev.hwk.node-image.file.size"
	AnnotationFileSHA256 = "dev.hwk.node-image.file.sha256"
)

// layerType is the layer media type of each file format.
var layerType = map[nodeimage.Format]string{
	nodeimage.FormatQCOW2: MediaTypeQCOW2,
	nodeimage.FormatVHDX:  MediaTypeVHDX,
	nodeimage.FormatVDI:   MediaTypeVDI,
	nodeimage.FormatTar:   MediaTypeRootfs,
}

// compressed reports whether hwk zstd-compresses a format's file for its
// layer; the rootfs tarball is gzip already and goes as it is.
func compressed(f nodeimage.Format) bool { return f != nodeimage.FormatTar }

func artifactType(f nodeimage.Format) string {
	if f == nodeimage.FormatTar {
		return ArtifactTypeRootfs
	}
	return ArtifactTypeDisk
}

// emptyJSON is the OCI empty descriptor's content, the one layer of the
// manifest that carries only a config.
var emptyJSON = []byte("{}")

var emptyDescriptor = ocispec.Descriptor{
	MediaType: ocispec.MediaTypeEmptyJSON,
	Digest:    digest.FromBytes(emptyJSON),
	Size:      int64(len(emptyJSON)),
	Data:      emptyJSON,
}

// imageArch is the architecture of the node images hwk builds: amd64
// only so far. The index leaves room for others: each artifact entry
// names its architecture.
const imageArch = "amd64"

// imageAnnotations returns what every entry of a node image's index
// records about the image.
func imageAnnotations(m *nodeimage.Manifest) map[string]string {
	return map[string]string{
		AnnotationName:              m.Name,
		AnnotationOS:                m.OS,
		AnnotationKubernetesVersion: m.KubernetesVersion,
		AnnotationSource:            string(m.Source),
		AnnotationArchitecture:      imageArch,
	}
}

// fileAnnotations returns the annotations that describe the file a layer
// unpacks to.
func fileAnnotations(a nodeimage.Artifact) map[string]string {
	return map[string]string{
		ocispec.AnnotationTitle: a.Path,
		AnnotationFileSize:      strconv.FormatInt(a.Size, 10),
		AnnotationFileSHA256:    a.SHA256,
	}
}

func merge(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// artifactManifest returns an OCI 1.1 artifact manifest: the node image's
// manifest as config, one layer.
func artifactManifest(artifact string, config, layer ocispec.Descriptor, ann map[string]string) ([]byte, error) {
	return json.Marshal(ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: artifact,
		Config:       config,
		Layers:       []ocispec.Descriptor{layer},
		Annotations:  ann,
	})
}

// describe returns the descriptor of data.
func describe(mediaType string, data []byte) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
}

// entries picks out of an index the entries of architecture arch: the
// docker image, the image manifest and each format's. Entries of other
// architectures, and anything hwk did not write, are left alone.
func entries(idx *ocispec.Index, arch string) (image *ocispec.Descriptor, formats map[nodeimage.Format]ocispec.Descriptor, archs []string) {
	formats = map[nodeimage.Format]ocispec.Descriptor{}
	seen := map[string]bool{}
	for i := range idx.Manifests {
		d := idx.Manifests[i]
		a := d.Annotations[AnnotationArchitecture]
		if d.Platform != nil && a == "" {
			a = d.Platform.Architecture
		}
		if a != "" && !seen[a] {
			seen[a] = true
			archs = append(archs, a)
		}
		if a != arch {
			continue
		}
		switch {
		case d.ArtifactType == ArtifactTypeImage:
			image = &idx.Manifests[i]
		case d.Annotations[AnnotationFormat] != "":
			formats[nodeimage.Format(d.Annotations[AnnotationFormat])] = d
		}
	}
	return image, formats, archs
}

// parseIndex decodes an index, refusing what is not one.
func parseIndex(data []byte, mediaType string) (*ocispec.Index, error) {
	var idx ocispec.Index
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("not an OCI image index: %w", err)
	}
	if mediaType != ocispec.MediaTypeImageIndex && idx.MediaType != ocispec.MediaTypeImageIndex {
		return nil, fmt.Errorf("it is a %s, not the OCI image index a node image is", mediaType)
	}
	return &idx, nil
}

// parseManifest decodes an image or artifact manifest.
func parseManifest(data []byte) (*ocispec.Manifest, error) {
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("not an OCI manifest: %w", err)
	}
	if m.MediaType != ocispec.MediaTypeImageManifest {
		return nil, fmt.Errorf("manifest media type %q is not %s", m.MediaType, ocispec.MediaTypeImageManifest)
	}
	return &m, nil
}

// checkLayoutArchive reads the headers of the OCI layout archive at file
// and refuses what no such archive holds: entries outside it, links,
// special and sparse files, two entries of one name, and an index.json or
// oci-layout larger than a manifest can be. Every error names the entry.
func checkLayoutArchive(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s is not a readable tar archive: %w", file, err)
		}
		if outside(h.Name) {
			return fmt.Errorf("%s: entry %q leads outside the archive (an absolute path or ..); an OCI layout names its files relative to its root", file, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeDir, tar.TypeXGlobalHeader:
		case tar.TypeSymlink, tar.TypeLink:
			// Why: the layout reader follows no link, symbolic or hard,
			// and one could only lead elsewhere.
			target := h.Linkname
			if h.Typeflag == tar.TypeSymlink {
				target = path.Join(path.Dir(h.Name), strings.ReplaceAll(target, `\`, "/"))
			}
			if outside(h.Linkname) || outside(target) {
				return fmt.Errorf("%s: entry %q is a link to %q, outside the archive", file, h.Name, h.Linkname)
			}
			return fmt.Errorf("%s: entry %q is a link (to %q); hwk reads OCI layouts of plain files and follows no link", file, h.Name, h.Linkname)
		default:
			return fmt.Errorf("%s: entry %q is a special file (type %q), which no OCI layout holds", file, h.Name, string(h.Typeflag))
		}
		// Why: a sparse file's holes read as zeros, however large.
		for k := range h.PAXRecords {
			if strings.HasPrefix(k, "GNU.sparse.") {
				return fmt.Errorf("%s: entry %q is a sparse file, which no OCI layout holds", file, h.Name)
			}
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Clean(h.Name)
		if seen[name] {
			return fmt.Errorf("%s: two entries are named %s", file, name)
		}
		seen[name] = true
		// Why: the layout reader reads both whole.
		if (name == ocispec.ImageIndexFile || name == ocispec.ImageLayoutFile) && h.Size > maxSmall {
			return fmt.Errorf("%s: its %s is %d bytes, more than an index can be", file, name, h.Size)
		}
	}
}

// outside reports whether an archive entry's name is an absolute path (with
// either slash, or a Windows drive) or climbs above the archive's root.
func outside(name string) bool {
	if strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) ||
		(len(name) >= 2 && name[1] == ':' && (name[0]|0x20 >= 'a' && name[0]|0x20 <= 'z')) {
		return true
	}
	c := path.Clean(strings.ReplaceAll(name, `\`, "/"))
	return c == ".." || strings.HasPrefix(c, "../")
}
