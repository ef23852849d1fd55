package imagearchive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"path"
	"strings"
	"sync"
)

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

// escapes reports whether a name in an archive leads outside it: an absolute
// path, or one whose ".." climb above its root.
func escapes(name string) bool {
	if absolute(name) {
		return true
	}
	c := path.Clean(strings.ReplaceAll(name, `\`, "/"))
	return c == ".." || strings.HasPrefix(c, "../")
}

// absolute reports whether a name is an absolute path, with either slash or
// a Windows drive.
func absolute(name string) bool {
	return strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) ||
		(len(name) >= 2 && name[1] == ':' && (name[0]|0x20 >= 'a' && name[0]|0x20 <= 'z'))
}

// entryName returns the name of the entry h within the archive. An entry whose
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

// sparse reports whether h is a GNU sparse file, in either of its formats.
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

// looksJSON reports whether b starts like a JSON object or array.
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
