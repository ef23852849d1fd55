// Package udf reads files from a UDF file system (ECMA-167 as profiled by
// OSTA UDF 1.02–2.01), the format of Windows installation ISOs: their
// ISO 9660 side holds only a README, the real tree is UDF. hwk reads
// sources/install.wim from one without mounting it, the same way on every
// host OS and without elevation.
//
// Only what such discs use is supported: 2048-byte sectors, one physical
// (type 1) partition, File Entries and Extended File Entries with short,
// long or embedded allocation descriptors. A UDF 2.50 metadata partition
// is refused with an error saying so.
package udf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"
	"unicode/utf16"
)

// SectorSize is the logical sector size of optical media (and ISOs).
const SectorSize = 2048

// anchorSector is where ECMA-167 3/8.4.2.1 puts an Anchor Volume
// Descriptor Pointer on every volume.
const anchorSector = 256

// Descriptor tag identifiers (ECMA-167 3/7.2.1 and 4/7.2.1).
const (
	tagAnchor           = 2
	tagPartition        = 5
	tagLogicalVolume    = 6
	tagTerminating      = 8
	tagFileSet          = 256
	tagFileIdentifier   = 257
	tagFileEntry        = 261
	tagExtendedFileEntr = 266
)

// ErrNotUDF is returned for an image with no UDF anchor.
var ErrNotUDF = errors.New("no UDF file system (no anchor volume descriptor at sector 256)")

// FS is a UDF volume opened for reading. It implements io/fs.FS; names
// are matched case-insensitively, as Windows does on these discs.
type FS struct {
	r         io.ReaderAt
	partStart int64 // first sector of partition 0
	partLen   int64 // in sectors
	blockSize int64
	root      *node
}

// node is a file or directory: its File Entry, read.
type node struct {
	name    string
	dir     bool
	size    int64
	modTime time.Time
	extents []extent // data extents; nil with embedded data
	inline  []byte   // embedded data (allocation descriptor type 3)

	block  uint32 // where its File Entry is
	parent *node  // the directory it was found in; nil for the root
	depth  int    // how many directories are above it
}

// Limits on what a damaged or crafted volume can make the reader do:
// directories far larger than Windows media's (a few hundred entries,
// tens of KiB), files in more pieces than any disc writer makes, or
// nesting deeper than any path Windows can open.
const (
	maxDirSize = 2 << 20
	maxExtents = 1 << 16
	maxDepth   = 128
)

// extent is a run of bytes on the volume. A sparse extent (allocated but
// not recorded, or not allocated) reads as zeros.
type extent struct {
	offset int64 // byte offset in the image
	length int64
	sparse bool
}

// Open reads the volume structures of the UDF image r.
func Open(r io.ReaderAt) (*FS, error) {
	f := &FS{r: r}
	anchor, err := f.sector(anchorSector)
	if err != nil {
		return nil, fmt.Errorf("udf: %w", err)
	}
	if tagID(anchor) != tagAnchor || !tagOK(anchor, anchorSector) {
		return nil, ErrNotUDF
	}
	// Main Volume Descriptor Sequence extent (ECMA-167 3/10.2).
	vdsLen := int64(le32(anchor[16:]))
	vdsLoc := int64(le32(anchor[20:]))
	var fsd longAD
	var havePart, haveLV bool
	for i := int64(0); i < vdsLen/SectorSize; i++ {
		d, err := f.sector(vdsLoc + i)
		if err != nil {
			return nil, fmt.Errorf("udf: volume descriptors: %w", err)
		}
		if !tagOK(d, uint32(vdsLoc+i)) {
			return nil, fmt.Errorf("udf: volume descriptor at sector %d is damaged", vdsLoc+i)
		}
		switch tagID(d) {
		case tagPartition:
			// ECMA-167 3/10.5: number at 22, start at 188, length at 192.
			if le16(d[22:]) == 0 && !havePart {
				f.partStart, f.partLen = int64(le32(d[188:])), int64(le32(d[192:]))
				havePart = true
			}
		case tagLogicalVolume:
			if haveLV {
				continue
			}
			// ECMA-167 3/10.6: block size at 212, the File Set
			// Descriptor's long_ad at 248, partition maps at 440.
			f.blockSize = int64(le32(d[212:]))
			fsd = readLongAD(d[248:])
			nMaps := le32(d[268:])
			p := d[440:]
			for range nMaps {
				if len(p) < 2 || p[1] == 0 || int(p[1]) > len(p) {
					return nil, errors.New("udf: damaged partition map")
				}
				if p[0] != 1 {
					return nil, errors.New("udf: the volume uses a virtual, sparable or metadata partition (UDF 2.50 or later), which hwk does not read; use an ISO written with UDF 1.02–2.01, as Microsoft's are")
				}
				p = p[p[1]:]
			}
			haveLV = true
		case tagTerminating:
			i = vdsLen // done
		}
	}
	switch {
	case !havePart || !haveLV:
		return nil, errors.New("udf: no partition or logical volume descriptor")
	case f.blockSize != SectorSize:
		return nil, fmt.Errorf("udf: logical block size %d; only %d is supported", f.blockSize, SectorSize)
	}
	d, err := f.block(fsd.block)
	if err != nil {
		return nil, fmt.Errorf("udf: file set descriptor: %w", err)
	}
	if tagID(d) != tagFileSet {
		return nil, errors.New("udf: no file set descriptor where the logical volume says")
	}
	// ECMA-167 4/14.1: the root directory's ICB at 400.
	f.root, err = f.entry(readLongAD(d[400:]).block, "/")
	if err != nil {
		return nil, fmt.Errorf("udf: root directory: %w", err)
	}
	if !f.root.dir {
		return nil, errors.New("udf: the root is not a directory")
	}
	return f, nil
}

// sector reads one whole sector of the image.
func (f *FS) sector(n int64) ([]byte, error) {
	b := make([]byte, SectorSize)
	if _, err := f.r.ReadAt(b, n*SectorSize); err != nil {
		return nil, fmt.Errorf("read sector %d: %w", n, err)
	}
	return b, nil
}

// block reads logical block n of the partition.
func (f *FS) block(n uint32) ([]byte, error) {
	if int64(n) >= f.partLen {
		return nil, fmt.Errorf("block %d is outside the partition (%d blocks)", n, f.partLen)
	}
	return f.sector(f.partStart + int64(n))
}

// entry reads the (Extended) File Entry at block n.
func (f *FS) entry(n uint32, name string) (*node, error) {
	b, err := f.block(n)
	if err != nil {
		return nil, err
	}
	if !tagOK(b, n) {
		return nil, fmt.Errorf("file entry of %q at block %d is damaged", name, n)
	}
	var eaOff, adOff int // where L_EA sits; where the EAs start
	var timeOff int
	switch tagID(b) {
	case tagFileEntry: // ECMA-167 4/14.9
		eaOff, adOff, timeOff = 168, 176, 84
	case tagExtendedFileEntr: // ECMA-167 4/14.17
		eaOff, adOff, timeOff = 208, 216, 92
	default:
		return nil, fmt.Errorf("no file entry for %q at block %d (tag %d)", name, n, tagID(b))
	}
	icb := b[16:36] // ICB tag, 4/14.6
	nd := &node{
		name:    name,
		dir:     icb[11] == 4,
		size:    int64(le64(b[56:])),
		modTime: timestamp(b[timeOff:]),
		block:   n,
	}
	if nd.size < 0 {
		return nil, fmt.Errorf("file entry of %q is damaged (its size, %d, is more than 2^63 bytes)", name, uint64(nd.size))
	}
	lEA, lAD := int(le32(b[eaOff:])), int(le32(b[eaOff+4:]))
	start := adOff + lEA
	if start+lAD > len(b) || lEA < 0 || lAD < 0 {
		return nil, fmt.Errorf("file entry of %q is damaged (descriptor lengths)", name)
	}
	ads := b[start : start+lAD]
	switch kind := le16(icb[18:]) & 7; kind {
	case 3: // embedded: the data is the descriptor area itself
		if int64(len(ads)) < nd.size {
			return nil, fmt.Errorf("file entry of %q is damaged (embedded data)", name)
		}
		nd.inline = ads[:nd.size]
		return nd, nil
	case 0, 1:
		if err := f.extents(nd, ads, kind == 1); err != nil {
			return nil, fmt.Errorf("%q: %w", name, err)
		}
	default:
		return nil, fmt.Errorf("%q uses extended allocation descriptors, which hwk does not read", name)
	}
	var total int64
	for _, e := range nd.extents {
		total += e.length
	}
	if total < nd.size {
		return nil, fmt.Errorf("%q: its extents hold %d bytes of its %d", name, total, nd.size)
	}
	return nd, nil
}

// extents reads a file's allocation descriptors (short_ad, 4/14.14.1, or
// long_ad, 4/14.14.2), following continuation extents (type 3).
func (f *FS) extents(nd *node, ads []byte, long bool) error {
	size := 8
	if long {
		size = 16
	}
	for hops := 0; ; hops++ {
		next := false
		for len(ads) >= size {
			raw := le32(ads)
			length, typ := int64(raw&0x3fffffff), raw>>30
			block := le32(ads[4:])
			ads = ads[size:]
			if length == 0 {
				break
			}
			if typ == 3 {
				if hops > 1000 {
					return errors.New("allocation descriptors loop")
				}
				b, err := f.block(block)
				if err != nil {
					return err
				}
				// An Allocation Extent Descriptor (4/14.5): 24 bytes, then
				// the descriptors.
				l := int(le32(b[20:]))
				if 24+l > len(b) {
					return errors.New("damaged allocation extent")
				}
				ads, next = b[24:24+l], true
				break
			}
			if int64(block)+(length+SectorSize-1)/SectorSize > f.partLen && typ == 0 {
				return fmt.Errorf("extent at block %d runs past the partition", block)
			}
			if len(nd.extents) == maxExtents {
				return fmt.Errorf("in more than %d pieces", maxExtents)
			}
			nd.extents = append(nd.extents, extent{
				offset: (f.partStart + int64(block)) * SectorSize,
				length: length,
				sparse: typ != 0,
			})
		}
		if !next {
			return nil
		}
	}
}

// children reads a directory's File Identifier Descriptors (4/14.4).
func (f *FS) children(dir *node) ([]*node, error) {
	if dir.size > maxDirSize {
		return nil, fmt.Errorf("directory %s is %d bytes, more than hwk reads of a directory (%d MiB)", dir.name, dir.size, maxDirSize>>20)
	}
	// Read descriptor by descriptor: a directory whose extents read as
	// zeros fails at its first, whatever size it claims.
	r := bufio.NewReader(io.NewSectionReader(dir.reader(f.r), 0, dir.size))
	head := make([]byte, 38)
	var out []*node
	for {
		if _, err := io.ReadFull(r, head); errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return out, nil // what is left is too short to be a descriptor
		} else if err != nil {
			return nil, fmt.Errorf("read directory %s: %w", dir.name, err)
		}
		if tagID(head) != tagFileIdentifier {
			return nil, fmt.Errorf("directory %s is damaged", dir.name)
		}
		chars := head[18]
		lFI, lIU := int(head[19]), int(le16(head[36:]))
		data := make([]byte, (38+lIU+lFI+3)&^3)
		copy(data, head)
		if _, err := io.ReadFull(r, data[38:]); errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("directory %s is damaged (identifier length)", dir.name)
		} else if err != nil {
			return nil, fmt.Errorf("read directory %s: %w", dir.name, err)
		}
		icb := readLongAD(data[20:])
		id := data[38+lIU : 38+lIU+lFI]
		if chars&(1<<3) != 0 || chars&(1<<2) != 0 { // parent, deleted
			continue
		}
		name, err := dstring(id)
		if err != nil {
			return nil, fmt.Errorf("directory %s: %w", dir.name, err)
		}
		// A name is one path element: anything else would make paths
		// that name other files, or none.
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			return nil, fmt.Errorf("directory %s is damaged: it holds an entry named %q", dir.name, name)
		}
		child, err := f.entry(icb.block, path.Join(dir.name, name))
		if err != nil {
			return nil, err
		}
		child.name = path.Join(dir.name, name)
		child.parent, child.depth = dir, dir.depth+1
		if child.dir {
			for a := dir; a != nil; a = a.parent {
				if a.block == icb.block {
					return nil, fmt.Errorf("directory %s is damaged: its entry %s is %s again (a loop)", dir.name, name, a.name)
				}
			}
			if child.depth > maxDepth {
				return nil, fmt.Errorf("directory %s is damaged: directories nested more than %d deep", dir.name, maxDepth)
			}
		}
		out = append(out, child)
	}
}

// lookup finds name (slash-separated, relative to the root) ignoring case.
func (f *FS) lookup(name string) (*node, error) {
	if !fs.ValidPath(name) {
		return nil, fs.ErrInvalid
	}
	cur := f.root
	if name == "." {
		return cur, nil
	}
	for _, part := range strings.Split(name, "/") {
		if !cur.dir {
			return nil, fs.ErrNotExist
		}
		kids, err := f.children(cur)
		if err != nil {
			return nil, err
		}
		// The name as spelt, else the first in any case.
		var found *node
		for _, k := range kids {
			if path.Base(k.name) == part {
				found = k
				break
			}
			if found == nil && strings.EqualFold(path.Base(k.name), part) {
				found = k
			}
		}
		if found == nil {
			return nil, fs.ErrNotExist
		}
		cur = found
	}
	return cur, nil
}

// OpenFile returns the regular file name as an io.ReaderAt with its size,
// for formats read by offset (a WIM's header points into the file).
func (f *FS) OpenFile(name string) (*io.SectionReader, error) {
	nd, err := f.lookup(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if nd.dir {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	}
	return io.NewSectionReader(nd.reader(f.r), 0, nd.size), nil
}

// Open implements fs.FS.
func (f *FS) Open(name string) (fs.File, error) {
	nd, err := f.lookup(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &file{fs: f, node: nd, SectionReader: io.NewSectionReader(nd.reader(f.r), 0, nd.size)}, nil
}

// reader reads a file's extents as one run of bytes.
func (nd *node) reader(r io.ReaderAt) io.ReaderAt {
	if nd.inline != nil {
		return byteReaderAt(nd.inline)
	}
	return extentReader{r: r, extents: nd.extents}
}

type extentReader struct {
	r       io.ReaderAt
	extents []extent
}

func (e extentReader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for _, x := range e.extents {
		if len(p) == 0 {
			break
		}
		if off >= x.length {
			off -= x.length
			continue
		}
		chunk := p[:min(int64(len(p)), x.length-off)]
		if x.sparse {
			clear(chunk)
		} else if m, err := e.r.ReadAt(chunk, x.offset+off); err != nil {
			return n + m, err
		}
		n += len(chunk)
		p = p[len(chunk):]
		off = 0
	}
	if len(p) > 0 {
		return n, io.EOF
	}
	return n, nil
}

type byteReaderAt []byte

func (b byteReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// file is an open fs.File.
type file struct {
	*io.SectionReader
	fs   *FS
	node *node
	kids []fs.DirEntry // nil until ReadDir reads the directory
	next int           // the next entry ReadDir returns
}

func (f *file) Stat() (fs.FileInfo, error) { return info{f.node}, nil }
func (f *file) Close() error               { return nil }

// ReadDir implements fs.ReadDirFile.
func (f *file) ReadDir(n int) ([]fs.DirEntry, error) {
	if !f.node.dir {
		return nil, &fs.PathError{Op: "readdir", Path: f.node.name, Err: errors.New("not a directory")}
	}
	if f.kids == nil {
		kids, err := f.fs.children(f.node)
		if err != nil {
			return nil, err
		}
		f.kids = make([]fs.DirEntry, len(kids))
		for i, k := range kids {
			f.kids[i] = fs.FileInfoToDirEntry(info{k})
		}
	}
	rest := f.kids[f.next:]
	if n > 0 {
		if len(rest) == 0 {
			return nil, io.EOF
		}
		rest = rest[:min(n, len(rest))]
	}
	f.next += len(rest)
	return rest, nil
}

type info struct{ n *node }

func (i info) Name() string {
	if i.n.name == "/" {
		return "."
	}
	return path.Base(i.n.name)
}
func (i info) Size() int64        { return i.n.size }
func (i info) ModTime() time.Time { return i.n.modTime }
func (i info) IsDir() bool        { return i.n.dir }
func (i info) Sys() any           { return nil }
func (i info) Mode() fs.FileMode {
	if i.n.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}

// longAD is the part of a long_ad (4/14.14.2) hwk uses: the block, in
// partition 0 (the only one supported).
type longAD struct{ block uint32 }

func readLongAD(b []byte) longAD { return longAD{block: le32(b[4:])} }

// dstring decodes an OSTA CS0 identifier (UDF 2.1.1): a compression ID
// of 8 (one byte per character) or 16 (UTF-16 big-endian), then the
// characters.
func dstring(b []byte) (string, error) {
	if len(b) == 0 {
		return "", nil
	}
	switch b[0] {
	case 8:
		r := make([]rune, len(b)-1)
		for i, c := range b[1:] {
			r[i] = rune(c)
		}
		return string(r), nil
	case 16:
		if len(b)%2 != 1 {
			return "", errors.New("a UTF-16 name of odd length")
		}
		u := make([]uint16, (len(b)-1)/2)
		for i := range u {
			u[i] = binary.BigEndian.Uint16(b[1+2*i:])
		}
		return string(utf16.Decode(u)), nil
	}
	return "", fmt.Errorf("a name with compression ID %d", b[0])
}

// timestamp decodes an ECMA-167 1/7.3 timestamp.
func timestamp(b []byte) time.Time {
	tz := int16(le16(b)<<4) >> 4 // 12-bit signed minutes from UTC
	loc := time.UTC
	if le16(b)>>12 == 1 && tz != -2047 {
		loc = time.FixedZone("", int(tz)*60)
	}
	return time.Date(int(int16(le16(b[2:]))), time.Month(b[4]), int(b[5]), int(b[6]), int(b[7]), int(b[8]),
		int(b[9])*10e6+int(b[10])*100e3+int(b[11])*1e3, loc)
}

// tagID returns a descriptor's tag identifier.
func tagID(b []byte) uint16 { return le16(b) }

// tagOK checks a descriptor tag (ECMA-167 3/7.2): the checksum of its
// bytes and the location it records it was written at.
func tagOK(b []byte, loc uint32) bool {
	var sum byte
	for i := 0; i < 16; i++ {
		if i != 4 {
			sum += b[i]
		}
	}
	return sum == b[4] && le32(b[12:]) == loc
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
