package udf

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"testing"
)

// sectorsMagic starts a fuzz input that is a sector listing rather than an
// image: the image's size in sectors, then each sector that is not all
// zeros as its number, its length and its bytes, trailing zeros cut.
// A UDF volume starts at sector 256, so an image is at least half a
// megabyte, almost all zeros that mutations would be wasted on.
const sectorsMagic = "hwk-udf-sectors\n"

// sectorImage is an image read from a sector listing: sectors not listed
// read as zeros.
type sectorImage struct {
	size    int64
	sectors map[int64][]byte
}

func (s *sectorImage) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		if pos >= s.size {
			return n, io.EOF
		}
		sec, in := pos/SectorSize, pos%SectorSize
		chunk := p[n : n+int(min(int64(len(p)-n), SectorSize-in, s.size-pos))]
		clear(chunk)
		if b := s.sectors[sec]; in < int64(len(b)) {
			copy(chunk, b[in:])
		}
		n += len(chunk)
	}
	return n, nil
}

// fuzzImage returns the image data stands for.
func fuzzImage(data []byte) io.ReaderAt {
	rest, ok := bytes.CutPrefix(data, []byte(sectorsMagic))
	if !ok {
		return bytes.NewReader(data)
	}
	img := &sectorImage{sectors: map[int64][]byte{}}
	if len(rest) >= 4 {
		img.size = int64(binary.LittleEndian.Uint32(rest)) * SectorSize
		rest = rest[4:]
	}
	for len(rest) >= 6 {
		sec, l := int64(binary.LittleEndian.Uint32(rest)), int(binary.LittleEndian.Uint16(rest[4:]))
		rest = rest[6:]
		l = min(l, len(rest), SectorSize)
		img.sectors[sec] = rest[:l]
		rest = rest[l:]
	}
	return img
}

// sectorListing returns the sector listing of img.
func sectorListing(img []byte) []byte {
	out := []byte(sectorsMagic)
	out = binary.LittleEndian.AppendUint32(out, uint32((len(img)+SectorSize-1)/SectorSize))
	for sec := 0; sec*SectorSize < len(img); sec++ {
		b := bytes.TrimRight(img[sec*SectorSize:min(len(img), (sec+1)*SectorSize)], "\x00")
		if len(b) == 0 {
			continue
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(sec))
		out = binary.LittleEndian.AppendUint16(out, uint16(len(b)))
		out = append(out, b...)
	}
	return out
}

func gunzip(t testing.TB, file string) []byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Bounds on what the walk of one input does: a damaged volume may
// legitimately list a directory under many names (hard links), so the
// walk stops after so many entries, and reads the start of each file.
const (
	walkEntries = 512
	readBytes   = 64 << 10
)

// FuzzOpen opens the image and walks its tree with io/fs, reading every
// file, as anything given the FS may.
func FuzzOpen(f *testing.F) {
	for _, file := range []string{"testdata/udf.iso.gz", "testdata/fuzz-seed.iso.gz"} {
		img := gunzip(f, file)
		f.Add(sectorListing(img))
		f.Add(img)
	}
	f.Add([]byte(sectorsMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		walk(t, fuzzImage(data))
		runtime.ReadMemStats(&after)
		// Per entry, at most a directory's worth of identifiers, its file
		// entries and what is read of it; nothing sized by a field.
		if used := after.TotalAlloc - before.TotalAlloc; used > 1<<30 {
			t.Fatalf("opening and walking the image allocated %d MiB", used>>20)
		}
	})
}

func walk(t *testing.T, img io.ReaderAt) {
	u, err := Open(img)
	if err != nil {
		if !errors.Is(err, ErrNotUDF) && !strings.HasPrefix(err.Error(), "udf: ") {
			t.Fatalf("Open: %v is neither ErrNotUDF nor a udf: error", err)
		}
		return
	}
	if !u.root.dir || u.root.size < 0 {
		t.Fatalf("root %+v", u.root)
	}
	seen := 0
	err = fs.WalkDir(u, ".", func(p string, d fs.DirEntry, err error) error {
		if seen++; seen > walkEntries {
			return fs.SkipAll
		}
		if !fs.ValidPath(p) || strings.Count(p, "/") > maxDepth {
			t.Fatalf("the walk reached %q, not a valid path of at most %d elements", p, maxDepth)
		}
		if err != nil {
			// A damaged directory: its error names it.
			if !strings.Contains(err.Error(), "director") && !strings.Contains(err.Error(), "block") && !strings.Contains(err.Error(), "\"") {
				t.Fatalf("%s: unclear error %v", p, err)
			}
			return nil
		}
		if p != "." && (d.Name() == "" || strings.Contains(d.Name(), "/") || d.Name() == "." || d.Name() == "..") {
			t.Fatalf("%s: entry named %q", p, d.Name())
		}
		info, err := d.Info()
		if err != nil || info.Size() < 0 || info.IsDir() != d.IsDir() {
			t.Fatalf("%s: info %v, %v", p, info, err)
		}
		// What the walk listed opens, as what it listed.
		file, err := u.Open(p)
		if err != nil {
			t.Fatalf("%s was listed but does not open: %v", p, err)
		}
		defer file.Close()
		st, err := file.Stat()
		if err != nil || st.IsDir() != d.IsDir() || st.Size() != info.Size() || (p != "." && st.Name() != d.Name()) {
			t.Fatalf("%s: opens as %s (dir %v, %d bytes), listed as %s (dir %v, %d bytes)", p, st.Name(), st.IsDir(), st.Size(), d.Name(), d.IsDir(), info.Size())
		}
		if d.IsDir() {
			return nil
		}
		n, err := io.Copy(io.Discard, io.LimitReader(file, readBytes))
		if want := min(info.Size(), readBytes); n > want || (err == nil && n != want) {
			t.Fatalf("%s: read %d bytes (%v), want %d", p, n, err, want)
		}
		r, err := u.OpenFile(p)
		if err != nil || r.Size() != info.Size() {
			t.Fatalf("%s: OpenFile %v, %v", p, r, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk: %v", err)
	}
}

// TestDirectoryLoopsAndBadNamesAreRefused checks that a directory entry
// naming its own directory (or one above it), or one whose name is a path,
// "..", or empty, is refused.
func TestDirectoryLoopsAndBadNamesAreRefused(t *testing.T) {
	// Why: a loop made the tree endless; a name that is a path or "..", or
	// empty (which took its directory's name), named other files or none.
	data := fixture(t)
	u, err := Open(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	sources, err := u.lookup("sources")
	if err != nil {
		t.Fatal(err)
	}
	// The File Identifier Descriptor of "empty.txt" in sources/, from its
	// tag to its name.
	fid := func(img []byte) []byte {
		for _, e := range sources.extents {
			dir := img[e.offset : e.offset+e.length]
			for i := 0; i+38 <= len(dir); i += 4 {
				if tagID(dir[i:]) != tagFileIdentifier {
					continue
				}
				lIU, lFI := int(le16(dir[i+36:])), int(dir[i+19])
				if i+38+lIU+lFI <= len(dir) && string(dir[i+38+lIU:i+38+lIU+lFI]) == "\x08empty.txt" {
					return dir[i : i+38+lIU+lFI]
				}
			}
		}
		t.Fatal("no identifier of empty.txt in sources/")
		return nil
	}
	name := func(fid []byte) []byte { return fid[38+int(le16(fid[36:])):] }
	rewrite := func(edit func(fid []byte)) *FS {
		img := bytes.Clone(data)
		edit(fid(img))
		u, err := Open(bytes.NewReader(img))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, c := range []struct {
		name string
		edit func(fid []byte)
		want string
	}{
		{"sources/ names itself", func(fid []byte) {
			binary.LittleEndian.PutUint32(fid[20+4:], sources.block)
		}, "a loop"},
		{"sources/ names the root", func(fid []byte) {
			binary.LittleEndian.PutUint32(fid[20+4:], u.root.block)
		}, "a loop"},
		{"a name with a slash", func(fid []byte) { copy(name(fid), "\x08a/b/c.txt") }, `entry named "a/b/c.txt"`},
		{"a name ..", func(fid []byte) { fid[19] = 3; copy(name(fid), "\x08..") }, `entry named ".."`},
		{"an empty name", func(fid []byte) { fid[19] = 1 }, `entry named ""`},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := rewrite(c.edit)
			_, err := fs.ReadDir(u, "sources")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ReadDir(sources) = %v, want %q", err, c.want)
			}
			if err := fs.WalkDir(u, ".", func(string, fs.DirEntry, error) error { return nil }); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHugeSizesAreRefused checks that a directory claiming more than any
// Windows medium's, and a size over 2^63, are refused.
func TestHugeSizesAreRefused(t *testing.T) {
	// Why: such a directory (its extents allocated, not recorded: zeros) was
	// read in full, and such a size made a negative slice bound.
	data := fixture(t)
	u, err := Open(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	// The File Entry of path in img. The size and the allocation
	// descriptors are not in its tag, whose checksum holds.
	fileEntry := func(img []byte, path string) []byte {
		nd, err := u.lookup(path)
		if err != nil {
			t.Fatal(err)
		}
		fe := img[(u.partStart+int64(nd.block))*SectorSize:][:SectorSize]
		if tagID(fe) != tagFileEntry {
			t.Fatalf("%s: tag %d, want a File Entry", path, tagID(fe))
		}
		return fe
	}

	img := bytes.Clone(data)
	fe := fileEntry(img, "sources")
	if kind := le16(fe[16+18:]) & 7; kind != 0 {
		t.Fatalf("sources/ has allocation descriptors of kind %d, want short ones", kind)
	}
	binary.LittleEndian.PutUint64(fe[56:], 1<<30-1)
	ad := fe[176+int(le32(fe[168:])):]
	binary.LittleEndian.PutUint32(ad, 1<<30|(1<<30-1)) // allocated, not recorded
	v, err := Open(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.ReadDir(v, "sources"); err == nil || !strings.Contains(err.Error(), "more than hwk reads of a directory") {
		t.Errorf("a directory of 1 GiB: %v", err)
	}

	img = bytes.Clone(data)
	binary.LittleEndian.PutUint64(fileEntry(img, "README.TXT")[56:], 1<<63)
	if v, err = Open(bytes.NewReader(img)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Open("README.TXT"); err == nil || !strings.Contains(err.Error(), "more than 2^63 bytes") {
		t.Errorf("a file of 2^63 bytes: %v", err)
	}
}
