// Package imagearchive reads container image archives — what `docker save`
// writes, in its classic layout and in the OCI layout of Docker 25 and
// later, and OCI image layouts packed in a tar — and writes, for one node,
// an archive holding only the images and platforms that node needs. It
// also knows which platforms a node can run (Runs, Best).
package imagearchive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/distribution/reference"
)

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

// Limits on what an archive may make Scan hold and do, so that a crafted
// one fails with a FormatError instead of exhausting memory or time:
// maxMetadata bounds the JSON entries kept in memory all together, and
// maxListed the manifests, layers and names its indexes and manifests
// list (each counts once per listing: an index that lists another index
// many times pays for each).
const (
	maxMetadata = 64 << 20
	maxListed   = 1 << 16
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

// Name is how messages call the image: its first name, else its digest.
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

// Scan reads a whole archive (plain or gzip-compressed tar) and describes
// its images. Every blob's content is checked against its digest on the
// way, so a corrupt archive fails here, before anything reaches a node.
// So does an archive with an entry whose name or link target leads
// outside it (an absolute path, or ".." above its root).
func Scan(r io.Reader) (*Archive, error) {
	tr, err := openTar(r)
	if err != nil {
		return nil, err
	}
	s := newScanner()
	defer s.release()
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, formatErr("not a readable tar archive: %v", err)
		}
		if err := s.read(h, tr, io.Discard); err != nil {
			return nil, err
		}
	}
	return s.finish()
}

// scanner builds an Archive from a tar's entries as they are read.
type scanner struct {
	a     *Archive
	links map[string]string
	buf   []byte
	// kept is the size of the entries' content held in memory.
	kept int64
	// files are the names of the files and links read so far.
	files map[string]bool
}

func newScanner() *scanner {
	return &scanner{
		a: &Archive{entries: map[string]*entry{}, blobs: map[string]*entry{},
			configs: map[string]*imageConfig{}, parsed: map[string]*manifest{}, indexes: map[string]*index{}},
		links: map[string]string{},
		files: map[string]bool{},
		buf:   copyBufs.Get().(*[1 << 20]byte)[:],
	}
}

// copyBufs are the buffers entries are copied through, kept from one
// read of an archive to the next: a load reads an archive, or an engine's
// save, once per node.
var copyBufs = sync.Pool{New: func() any { return new([1 << 20]byte) }}

// release gives the scanner's buffer back; the scanner is done.
func (s *scanner) release() {
	copyBufs.Put((*[1 << 20]byte)(s.buf))
	s.buf = nil
}

// escapes says whether a name in an archive leads outside it: an absolute
// path, or one whose ".." climb above its root.
func escapes(name string) bool {
	if absolute(name) {
		return true
	}
	c := path.Clean(strings.ReplaceAll(name, `\`, "/"))
	return c == ".." || strings.HasPrefix(c, "../")
}

// absolute says whether a name is an absolute path, with either slash or
// a Windows drive.
func absolute(name string) bool {
	return strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) ||
		(len(name) >= 2 && name[1] == ':' && (name[0]|0x20 >= 'a' && name[0]|0x20 <= 'z'))
}

// entryName is the name of the entry h within the archive. An entry whose
// name or link target leads outside the archive is refused: no image
// archive has one, and whatever unpacks this one must never be handed
// one.
func entryName(h *tar.Header) (string, error) {
	if escapes(h.Name) {
		return "", formatErr("archive entry %q leads outside the archive (an absolute path or ..); an image archive names its files relative to its root", h.Name)
	}
	if sparse(h) {
		// Its holes read as zeros: a few bytes could stand for terabytes.
		return "", formatErr("archive entry %q is a sparse file, which no image archive holds", h.Name)
	}
	name := cleanName(h.Name)
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeSymlink, tar.TypeLink:
		if name == "" {
			return "", formatErr("archive entry %q is a file without a name", h.Name)
		}
	}
	switch h.Typeflag {
	case tar.TypeSymlink:
		// A symbolic link's target is relative to the link's directory.
		if absolute(h.Linkname) || escapes(path.Join(path.Dir(name), strings.ReplaceAll(h.Linkname, `\`, "/"))) {
			return "", formatErr("archive entry %q is a symbolic link to %q, outside the archive", h.Name, h.Linkname)
		}
	case tar.TypeLink:
		if escapes(h.Linkname) {
			return "", formatErr("archive entry %q is a hard link to %q, outside the archive", h.Name, h.Linkname)
		}
	}
	return name, nil
}

// claim records the name of a file or link. Two entries of one name are
// two contents that hwk and the node's importer could each take
// differently, so the second is an error.
func (s *scanner) claim(name string) error {
	if s.files[name] {
		return formatErr("archive has two entries named %s", name)
	}
	s.files[name] = true
	return nil
}

// sparse says whether h is a GNU sparse file, in either of its formats.
func sparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// read takes in the entry h, its content read from r and copied to w. A
// blob whose content does not match its name's digest is an error.
func (s *scanner) read(h *tar.Header, r io.Reader, w io.Writer) error {
	name, err := entryName(h)
	if err != nil {
		return err
	}
	switch h.Typeflag {
	case tar.TypeReg:
		if err := s.claim(name); err != nil {
			return err
		}
	case tar.TypeSymlink, tar.TypeLink:
		if err := s.claim(name); err != nil {
			return err
		}
		target := h.Linkname
		if h.Typeflag == tar.TypeSymlink {
			target = path.Join(path.Dir(name), target)
		}
		s.links[name] = cleanName(target)
		return nil
	default:
		return nil
	}
	e := &entry{name: name, size: h.Size}
	hash := sha256.New()
	var small bytes.Buffer
	sinks := []io.Writer{hash, w}
	if h.Size <= smallEntry {
		sinks = append(sinks, &small)
	}
	hw := &headWriter{n: 8}
	n, err := io.CopyBuffer(io.MultiWriter(append(sinks, hw)...), r, s.buf)
	if err != nil {
		return formatErr("archive is cut short or unreadable in %s: %v", name, err)
	}
	if n != h.Size {
		return formatErr("archive is cut short in %s", name)
	}
	e.digest = "sha256:" + hex.EncodeToString(hash.Sum(nil))
	e.head = hw.b
	// Only JSON (indexes, manifests, configs) is ever read back: small
	// layers and the like are not kept.
	if h.Size <= smallEntry && (name == "index.json" || name == "manifest.json" || looksJSON(small.Bytes())) {
		s.kept += h.Size
		if s.kept > maxMetadata {
			return formatErr("archive holds more than %d MiB of manifests and configs; hwk refuses an archive this large", maxMetadata>>20)
		}
		e.data = small.Bytes()
	}
	if d, ok := blobDigest(name); ok && d != e.digest {
		return formatErr("archive is corrupt: %s holds content with digest %s", name, e.digest)
	}
	s.add(e)
	return nil
}

// looksJSON says whether b starts like a JSON object or array.
func looksJSON(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

// jsonOf decodes the JSON entry e, what the archive holds as what, into v.
func jsonOf(e *entry, what string, v any) error {
	switch {
	case e.size > smallEntry:
		return formatErr("%s is %d bytes, more than hwk reads of a manifest, index or config (%d MiB)", what, e.size, smallEntry>>20)
	case e.data == nil && e.size > 0:
		return formatErr("%s: not JSON", what)
	}
	if err := json.Unmarshal(e.data, v); err != nil {
		return formatErr("%s: %v", what, err)
	}
	return nil
}

// list counts n more things listed against maxListed.
func (a *Archive) list(n int) error {
	a.listed += n
	if a.listed > maxListed {
		return formatErr("the archive's indexes and manifests list more than %d manifests, layers and names; hwk refuses an archive this large", maxListed)
	}
	return nil
}

// add records an entry whose content has been checked or passed over.
func (s *scanner) add(e *entry) {
	s.a.entries[e.name] = e
	s.a.Bytes += e.size
	if d, ok := blobDigest(e.name); ok {
		s.a.blobs[d] = e
	}
}

// finish resolves links and reads the archive's index.
func (s *scanner) finish() (*Archive, error) {
	a := s.a
	for name, target := range s.links {
		// A link's chain is short (docker save links a repeated layer to
		// its first copy); a few hops catch a loop.
		for i := 0; i < 8 && a.entries[target] == nil && s.links[target] != ""; i++ {
			target = s.links[target]
		}
		if e := a.entries[target]; e != nil {
			a.entries[name] = e
		}
	}
	var err error
	switch {
	case a.entries["index.json"] != nil:
		err = a.readOCI()
	case a.entries["manifest.json"] != nil:
		err = a.readDocker()
	default:
		err = formatErr("no index.json or manifest.json: not an image archive from `docker save` or an OCI image layout")
	}
	if err != nil {
		return nil, err
	}
	if len(a.Images) == 0 {
		return nil, formatErr("the archive holds no images")
	}
	return a, nil
}

// openTar reads r as a tar, gunzipping it first when it is compressed.
func openTar(r io.Reader) (*tar.Reader, error) {
	// Large reads (the entries' content, through a copy buffer) bypass
	// the buffer; it serves the headers and gzip.
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(2)
	if err != nil {
		return nil, formatErr("not a readable tar archive: %v", err)
	}
	if magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, formatErr("bad gzip stream: %v", err)
		}
		return tar.NewReader(zr), nil
	}
	return tar.NewReader(br), nil
}

// headWriter keeps the first n bytes written to it.
type headWriter struct {
	n int
	b []byte
}

func (h *headWriter) Write(p []byte) (int, error) {
	if need := h.n - len(h.b); need > 0 {
		h.b = append(h.b, p[:min(need, len(p))]...)
	}
	return len(p), nil
}

func cleanName(n string) string { return strings.TrimPrefix(path.Clean("/"+n), "/") }

// blobDigest is the digest an OCI layout's blobs/ALG/HEX path names.
func blobDigest(name string) (string, bool) {
	parts := strings.Split(name, "/")
	if len(parts) != 3 || parts[0] != "blobs" || parts[1] != "sha256" || len(parts[2]) != 64 {
		return "", false
	}
	if _, err := hex.DecodeString(parts[2]); err != nil {
		return "", false
	}
	return "sha256:" + parts[2], true
}

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ociPlatform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant,omitempty"`
	OSVersion    string `json:"os.version,omitempty"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType,omitempty"`
	Manifests     []descriptor `json:"manifests"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType,omitempty"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type imageConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant,omitempty"`
	OSVersion    string `json:"os.version,omitempty"`
	RootFS       struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

func (c imageConfig) platform() Platform {
	return Platform{OS: c.OS, Architecture: c.Architecture, Variant: c.Variant, OSVersion: c.OSVersion}.Normalize()
}

// readOCI reads an OCI image layout: index.json names the images, each a
// manifest or an index of per-platform manifests.
func (a *Archive) readOCI() error {
	var idx index
	if err := jsonOf(a.entries["index.json"], "index.json", &idx); err != nil {
		return err
	}
	byDigest := map[string]int{}
	refs := map[int]map[string]bool{}
	for _, d := range idx.Manifests {
		if err := a.list(1); err != nil {
			return err
		}
		if d.Digest == "" {
			return formatErr("index.json: a manifest entry has no digest")
		}
		if err := checkDescriptor(d, "index.json"); err != nil {
			return err
		}
		i, ok := byDigest[d.Digest]
		if !ok {
			ms, err := a.manifests(d, 0)
			if err != nil {
				return err
			}
			a.Images = append(a.Images, Image{Digest: d.Digest, Manifests: ms})
			i = len(a.Images) - 1
			byDigest[d.Digest] = i
			refs[i] = map[string]bool{}
		}
		if ref := refFromAnnotations(d.Annotations); ref != "" && !refs[i][ref] {
			refs[i][ref] = true
			a.Images[i].Refs = append(a.Images[i].Refs, ref)
		}
	}
	return nil
}

// checkDescriptor refuses a descriptor (in where) whose digest is not
// one or whose size is negative: what names content by such a digest is
// not an image archive, and nothing should be looked up by it.
func checkDescriptor(d descriptor, where string) error {
	if !validDigest(d.Digest) {
		return formatErr("%s: %q is not a digest", where, d.Digest)
	}
	if d.Size < 0 {
		return formatErr("%s: %s has a negative size", where, d.Digest)
	}
	return nil
}

// validDigest says whether s is an OCI digest: algorithm:encoded, and for
// sha256 the 64 hex digits of one.
func validDigest(s string) bool {
	alg, enc, ok := strings.Cut(s, ":")
	if !ok || alg == "" || enc == "" {
		return false
	}
	for _, c := range alg {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("+._-", c)) {
			return false
		}
	}
	for _, c := range enc {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("=_-", c)) {
			return false
		}
	}
	if alg == "sha256" {
		_, err := hex.DecodeString(enc)
		return len(enc) == 64 && err == nil && strings.ToLower(enc) == enc
	}
	return true
}

// index is the index blob e (of digest d), parsed once.
func (a *Archive) index(d string, e *entry) (*index, error) {
	return parseOnce(a.indexes, d, e, "index "+d)
}

// manifest is the manifest blob e (of digest d), parsed once.
func (a *Archive) manifest(d string, e *entry) (*manifest, error) {
	return parseOnce(a.parsed, d, e, "manifest "+d)
}

// config is the image config entry e (what names it), parsed once.
func (a *Archive) config(e *entry, what string) (*imageConfig, error) {
	return parseOnce(a.configs, e.digest, e, what)
}

// parseOnce is the JSON of entry e (what names it in an error) as a T,
// kept in cache under key so that it is parsed only once.
func parseOnce[T any](cache map[string]*T, key string, e *entry, what string) (*T, error) {
	if v := cache[key]; v != nil {
		return v, nil
	}
	v := new(T)
	if err := jsonOf(e, what, v); err != nil {
		return nil, err
	}
	cache[key] = v
	return v, nil
}

// manifests resolves a descriptor to the runnable manifests under it.
// Attestations and other non-image entries of an index are skipped.
func (a *Archive) manifests(d descriptor, depth int) ([]Manifest, error) {
	if depth > 4 {
		return nil, formatErr("indexes nested too deep at %s", d.Digest)
	}
	e := a.blobs[d.Digest]
	switch d.MediaType {
	case mediaOCIIndex, mediaDockerList:
		if e == nil {
			return nil, formatErr("archive lacks the index %s", d.Digest)
		}
		idx, err := a.index(d.Digest, e)
		if err != nil {
			return nil, err
		}
		var out []Manifest
		for _, c := range idx.Manifests {
			if err := a.list(1); err != nil {
				return nil, err
			}
			if c.Platform != nil && (c.Platform.OS == "unknown" || c.Platform.Architecture == "unknown") {
				continue // a build attestation, not an image
			}
			if err := checkDescriptor(c, "index "+d.Digest); err != nil {
				return nil, err
			}
			ms, err := a.manifests(c, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, ms...)
		}
		return out, nil
	case mediaOCIManifest, mediaDockerManifest:
	default:
		return nil, nil // a blob type hwk does not run (artifacts, signatures)
	}
	m := Manifest{Digest: d.Digest, mediaType: d.MediaType}
	if d.Platform != nil {
		m.Platform = Platform{OS: d.Platform.OS, Architecture: d.Platform.Architecture, Variant: d.Platform.Variant, OSVersion: d.Platform.OSVersion}.Normalize()
	}
	if e == nil {
		m.Missing = d.Digest
		return []Manifest{m}, nil
	}
	mf, err := a.manifest(d.Digest, e)
	if err != nil {
		return nil, err
	}
	if err := a.list(1 + len(mf.Layers)); err != nil {
		return nil, err
	}
	m.raw = e.data
	for _, b := range append([]descriptor{mf.Config}, mf.Layers...) {
		if err := checkDescriptor(b, "manifest "+d.Digest); err != nil {
			return nil, err
		}
		be := a.blobs[b.Digest]
		if be == nil {
			if m.Missing == "" {
				m.Missing = b.Digest
			}
		} else if be.size != b.Size {
			return nil, formatErr("archive is corrupt: manifest %s gives %s as %d bytes, the archive holds %d", d.Digest, b.Digest, b.Size, be.size)
		} else {
			m.Bytes += be.size
		}
		m.blobs = append(m.blobs, b.Digest)
	}
	m.Config = mf.Config.Digest
	var diffIDs []string
	if ce := a.blobs[mf.Config.Digest]; ce != nil {
		c, err := a.config(ce, "config "+mf.Config.Digest)
		if err != nil {
			return nil, err
		}
		// The config is the image's own word on its platform; an
		// index entry may leave os.version out.
		m.Platform = c.platform()
		diffIDs = c.RootFS.DiffIDs
	}
	for i, l := range mf.Layers {
		layer := Layer{Digest: l.Digest, Size: l.Size}
		if len(diffIDs) == len(mf.Layers) {
			layer.DiffID = diffIDs[i]
		}
		m.Layers = append(m.Layers, layer)
	}
	return []Manifest{m}, nil
}

// dockerManifestEntry is one image of a classic docker save's manifest.json.
type dockerManifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// readDocker reads a classic docker save: manifest.json lists each image's
// config file, tags and layer tars. hwk writes a manifest for each, as
// containerd's importer would, so that every archive reaches a node as an
// OCI layout.
func (a *Archive) readDocker() error {
	var entries []dockerManifestEntry
	if err := jsonOf(a.entries["manifest.json"], "manifest.json", &entries); err != nil {
		return err
	}
	for _, de := range entries {
		if err := a.list(1 + len(de.Layers) + len(de.RepoTags)); err != nil {
			return err
		}
		ce := a.entries[cleanName(de.Config)]
		if ce == nil {
			return formatErr("archive lacks %s, the config manifest.json names", de.Config)
		}
		c, err := a.config(ce, "config "+de.Config)
		if err != nil {
			return err
		}
		if d, ok := legacyConfigDigest(de.Config); ok && d != ce.digest {
			return formatErr("archive is corrupt: %s holds content with digest %s", de.Config, ce.digest)
		}
		if len(c.RootFS.DiffIDs) != len(de.Layers) {
			return formatErr("archive is corrupt: %s lists %d layers, manifest.json %d", de.Config, len(c.RootFS.DiffIDs), len(de.Layers))
		}
		mf := manifest{SchemaVersion: 2, MediaType: mediaOCIManifest,
			Config: descriptor{MediaType: mediaOCIConfig, Digest: ce.digest, Size: ce.size}}
		a.blobs[ce.digest] = ce
		m := Manifest{Platform: c.platform(), Config: ce.digest, Bytes: ce.size, mediaType: mediaOCIManifest}
		m.blobs = append(m.blobs, ce.digest)
		for i, l := range de.Layers {
			le := a.entries[cleanName(l)]
			if le == nil {
				return formatErr("archive lacks the layer %s that manifest.json names", l)
			}
			if le.digest != c.RootFS.DiffIDs[i] {
				// A compressed layer's digest is not its diff ID; only
				// an uncompressed one can be checked against the config.
				if layerMediaType(le.head) == mediaLayerTar {
					return formatErr("archive is corrupt: layer %s has digest %s, its config expects %s", l, le.digest, c.RootFS.DiffIDs[i])
				}
			}
			a.blobs[le.digest] = le
			mf.Layers = append(mf.Layers, descriptor{MediaType: layerMediaType(le.head), Digest: le.digest, Size: le.size})
			m.blobs = append(m.blobs, le.digest)
			m.Layers = append(m.Layers, Layer{Digest: le.digest, DiffID: c.RootFS.DiffIDs[i], Size: le.size})
			m.Bytes += le.size
		}
		raw, err := json.Marshal(mf)
		if err != nil {
			return err
		}
		m.raw = raw
		m.Digest = digestOf(raw)
		im := Image{Digest: ce.digest, Manifests: []Manifest{m}}
		seen := map[string]bool{}
		for _, t := range de.RepoTags {
			if ref, err := normalizeRef(t); err == nil && !seen[ref] {
				seen[ref] = true
				im.Refs = append(im.Refs, ref)
			}
		}
		a.Images = append(a.Images, im)
	}
	return nil
}

// legacyConfigDigest is the digest a classic config file's name carries
// (<hex>.json, or blobs/sha256/<hex> in Docker 25's compatible
// manifest.json).
func legacyConfigDigest(name string) (string, bool) {
	name = cleanName(name)
	if d, ok := blobDigest(name); ok {
		return d, true
	}
	hexPart := strings.TrimSuffix(name, ".json")
	if len(hexPart) != 64 || strings.Contains(hexPart, "/") {
		return "", false
	}
	if _, err := hex.DecodeString(hexPart); err != nil {
		return "", false
	}
	return "sha256:" + hexPart, true
}

func layerMediaType(head []byte) string {
	switch {
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		return mediaLayerGzip
	case len(head) >= 4 && head[0] == 0x28 && head[1] == 0xb5 && head[2] == 0x2f && head[3] == 0xfd:
		return mediaLayerZstd
	}
	return mediaLayerTar
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// refFromAnnotations is the full name an index entry gives its image:
// containerd's annotation, else OCI's when it is a whole reference rather
// than only a tag.
func refFromAnnotations(ann map[string]string) string {
	for _, k := range []string{annotationName, annotationRefName} {
		v := ann[k]
		if v == "" || (k == annotationRefName && !strings.ContainsAny(v, "/:@")) {
			continue
		}
		if ref, err := normalizeRef(v); err == nil {
			return ref
		}
	}
	return ""
}

// normalizeRef spells a name the way containerd stores it:
// busybox becomes docker.io/library/busybox:latest.
func normalizeRef(s string) (string, error) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return "", err
	}
	return reference.TagNameOnly(named).String(), nil
}

// NormalizeRef is normalizeRef for callers outside: the name containerd
// and crictl will show for s.
func NormalizeRef(s string) (string, error) { return normalizeRef(s) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Selection picks one manifest of one image for a node, under the
// names it is to have there.
type Selection struct {
	Image    int
	Manifest int
	// Refs are the names to give it; empty means all of the image's.
	Refs []string
}

// ErrIncomplete is a selected manifest whose blobs the archive lacks.
var ErrIncomplete = errors.New("the archive lacks part of the image")

// HasBlob reports whether the archive holds the blob digest.
func (a *Archive) HasBlob(digest string) bool { return a.blobs[digest] != nil }

// Plan is the archive a node gets: its index and the blobs it needs.
type Plan struct {
	index []byte
	blobs map[string]bool
	// Bytes is how much the written archive holds, a little less than
	// Write's count (tar headers).
	Bytes int64
	// Images are, per selection, what of it the archive carries.
	Images []Carried
}

// Carried is what a plan's archive carries of one selection: the layers
// it sends and the bytes they and the image's manifest and config add
// (a layer two selections share counts for the first), and the layers it
// leaves out because the node has them.
type Carried struct {
	LayersSent, LayersReused int
	Bytes                    int64
}

// Have is what a node already holds: content by digest, and unpacked
// layer chains by chain ID. A layer it has either way need not be sent:
// containerd imports an archive that lacks it, taking the blob from its
// content store or skipping the unpack of a chain it has.
type Have interface {
	Blob(digest string) bool
	Snapshot(chainID string) bool
}

// ChainIDs are the chain IDs of a stack of layers given by their diff
// IDs, base first (the OCI image spec's ChainID: the base's diff ID,
// then the digest of "parent chain ID, space, diff ID").
func ChainIDs(diffIDs []string) []string {
	out := make([]string, len(diffIDs))
	for i, d := range diffIDs {
		if i == 0 {
			out[i] = d
			continue
		}
		out[i] = digestOf([]byte(out[i-1] + " " + d))
	}
	return out
}

// Reused reports, per layer (base first), whether have holds it: its
// blob, or its chain unpacked (nil have holds nothing).
func Reused(have Have, layers []Layer) []bool {
	out := make([]bool, len(layers))
	if have == nil {
		return out
	}
	var diffIDs []string
	for _, l := range layers {
		diffIDs = append(diffIDs, l.DiffID)
	}
	chains := ChainIDs(diffIDs)
	known := true
	for i, l := range layers {
		// A chain is known only while every diff ID below it is.
		known = known && l.DiffID != ""
		out[i] = have.Blob(l.Digest) || (known && have.Snapshot(chains[i]))
	}
	return out
}

// Plan works out the archive of sels for a node that holds have (nil:
// nothing), which the archive then leaves out.
func (a *Archive) Plan(sels []Selection, have Have) (*Plan, error) {
	p := &Plan{blobs: map[string]bool{}}
	idx := index{SchemaVersion: 2, MediaType: mediaOCIIndex, Manifests: []descriptor{}}
	for _, s := range sels {
		im := a.Images[s.Image]
		m := im.Manifests[s.Manifest]
		refs := s.Refs
		if len(refs) == 0 {
			refs = im.Refs
		}
		var c Carried
		skip := map[string]bool{}
		for i, r := range Reused(have, m.Layers) {
			if r {
				skip[m.Layers[i].Digest] = true
				c.LayersReused++
			} else {
				c.LayersSent++
			}
		}
		// An archive may lack what the node holds (one made of what a
		// push sent), never anything else.
		for _, b := range m.blobs {
			if a.blobs[b] == nil && !skip[b] && (have == nil || !have.Blob(b)) {
				return nil, fmt.Errorf("%s (%s): %w: blob %s is not in it", im.Name(), m.Platform, ErrIncomplete, b)
			}
		}
		if m.raw == nil {
			return nil, fmt.Errorf("%s (%s): %w: manifest %s is not in it", im.Name(), m.Platform, ErrIncomplete, m.Digest)
		}
		p.blobs[m.Digest] = true
		for _, b := range m.blobs {
			if !p.blobs[b] && !skip[b] && a.blobs[b] != nil {
				p.blobs[b] = true
				p.Bytes += a.blobs[b].size
				c.Bytes += a.blobs[b].size
			}
		}
		p.Bytes += int64(len(m.raw))
		c.Bytes += int64(len(m.raw))
		p.Images = append(p.Images, c)
		plat := &ociPlatform{OS: m.Platform.OS, Architecture: m.Platform.Architecture, Variant: m.Platform.Variant, OSVersion: m.Platform.OSVersion}
		for _, ref := range refs {
			idx.Manifests = append(idx.Manifests, descriptor{
				MediaType: m.mediaType, Digest: m.Digest, Size: int64(len(m.raw)), Platform: plat,
				Annotations: map[string]string{annotationName: ref, annotationRefName: tagOf(ref)},
			})
		}
	}
	raw, err := json.Marshal(idx)
	if err != nil {
		return nil, err
	}
	p.index = raw
	return p, nil
}

func tagOf(ref string) string {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ref
	}
	if t, ok := named.(reference.Tagged); ok {
		return t.Tag()
	}
	return ref
}

// Write writes the plan's archive, an OCI image layout in a tar, to w,
// copying blobs from src, the scanned archive read again from its start.
// A blob whose content differs from the scan fails the write; w then ends
// in bytes no tar reader accepts (see Poison), so that what reads it
// cannot mistake a cut-short archive for a whole one.
func (a *Archive) Write(w io.Writer, src io.Reader, p *Plan) (err error) {
	defer func() {
		if err != nil {
			Poison(w)
		}
	}()
	tw := tar.NewWriter(w)
	add := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o444, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add("oci-layout", []byte(ociLayout)); err != nil {
		return err
	}
	if err := add("index.json", p.index); err != nil {
		return err
	}
	written := map[string]bool{}
	// Manifests hwk holds in memory (every manifest it wrote for a
	// classic archive, and any it read) go first.
	var mdigests []string
	for d := range p.blobs {
		mdigests = append(mdigests, d)
	}
	sort.Strings(mdigests)
	for _, d := range mdigests {
		raw := a.manifestJSON(d)
		if raw == nil {
			continue
		}
		if err := add(blobName(d), raw); err != nil {
			return err
		}
		written[d] = true
	}
	tr, err := openTar(src)
	if err != nil {
		return err
	}
	buf := copyBufs.Get().(*[1 << 20]byte)
	defer copyBufs.Put(buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read the archive again: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		e := a.entries[cleanName(h.Name)]
		if e == nil || !p.blobs[e.digest] || written[e.digest] || e.size != h.Size {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: blobName(e.digest), Mode: 0o444, Size: e.size, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		hash := sha256.New()
		if _, err := io.CopyBuffer(io.MultiWriter(tw, hash), tr, buf[:]); err != nil {
			return fmt.Errorf("copy %s: %w", h.Name, err)
		}
		if got := "sha256:" + hex.EncodeToString(hash.Sum(nil)); got != e.digest {
			return fmt.Errorf("the archive changed since it was read: %s now has digest %s", h.Name, got)
		}
		written[e.digest] = true
	}
	for d := range p.blobs {
		if !written[d] {
			return fmt.Errorf("the archive changed since it was read: blob %s is gone", d)
		}
	}
	return tw.Close()
}

// manifestJSON is the JSON of a manifest the archive holds, by digest.
func (a *Archive) manifestJSON(d string) []byte {
	for _, im := range a.Images {
		for _, m := range im.Manifests {
			if m.Digest == d {
				return m.raw
			}
		}
	}
	return nil
}

// ociLayout is an OCI image layout's oci-layout file.
const ociLayout = `{"imageLayoutVersion":"1.0.0"}`

// Pack writes an OCI image layout tar to w holding one image manifest,
// raw (of mediaType), named refs, and those of its config and layers that
// blob opens; a blob it reports as fs.ErrNotExist is left out (the reader
// holds it already).
func Pack(w io.Writer, mediaType string, raw []byte, refs []string, blob func(digest string) (io.ReadCloser, int64, error)) error {
	var mf manifest
	if err := json.Unmarshal(raw, &mf); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if mf.Config.Digest == "" {
		return fmt.Errorf("a %s, not an image manifest", mediaType)
	}
	d := digestOf(raw)
	idx := index{SchemaVersion: 2, MediaType: mediaOCIIndex}
	for _, ref := range refs {
		idx.Manifests = append(idx.Manifests, descriptor{MediaType: mediaType, Digest: d, Size: int64(len(raw)),
			Annotations: map[string]string{annotationName: ref, annotationRefName: tagOf(ref)}})
	}
	ix, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	add := func(name string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o444, Size: size, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"oci-layout", []byte(ociLayout)}, {"index.json", ix}, {blobName(d), raw}} {
		if err := add(f.name, int64(len(f.data)), bytes.NewReader(f.data)); err != nil {
			return err
		}
	}
	done := map[string]bool{}
	for _, l := range append([]descriptor{mf.Config}, mf.Layers...) {
		if done[l.Digest] {
			continue
		}
		done[l.Digest] = true
		rc, size, err := blob(l.Digest)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		err = add(blobName(l.Digest), size, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

func blobName(d string) string { return "blobs/sha256/" + strings.TrimPrefix(d, "sha256:") }

// Poison ends a stream that is being read as a tar with bytes no tar
// reader takes for a header or for the end of the archive, so that a
// reader given a stream cut off between two entries fails rather than
// taking what it got for the whole archive.
func Poison(w io.Writer) {
	junk := bytes.Repeat([]byte{0xff}, 2*512)
	_, _ = w.Write(junk)
}
