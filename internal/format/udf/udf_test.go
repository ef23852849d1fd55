package udf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hwk-dev/hwk/internal/format/isoimage"
	"github.com/hwk-dev/hwk/internal/testing/winimagetest"
)

// fixture returns testdata/udf.iso.gz: testdata/tree written by genisoimage
// -udf (see testdata/make.sh).
func fixture(t *testing.T) []byte {
	t.Helper()
	return gunzip(t, "testdata/udf.iso.gz")
}

// sameTree checks that every file under dir reads back from u with the
// same bytes, and that u has nothing dir lacks.
func sameTree(t *testing.T, u *FS, dir string) {
	t.Helper()
	want := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		want[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	err = fs.WalkDir(u, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		got[p], err = fs.ReadFile(u, p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("the image has %d files, the tree %d: %v", len(got), len(want), keys(got))
	}
	for name, data := range want {
		if !bytes.Equal(got[name], data) {
			t.Errorf("%s: read %d bytes, want the tree's %d", name, len(got[name]), len(data))
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestReadsGenisoimageUDF(t *testing.T) {
	u, err := Open(bytes.NewReader(fixture(t)))
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, u, "testdata/tree")
	if err := fstest.TestFS(u, "README.TXT", "sources/install.wim", "sources/Ωmega.txt", "efi/microsoft/boot/efisys_noprompt.bin"); err != nil {
		t.Error(err)
	}
	// Names as Windows media spell them in any case.
	r, err := u.OpenFile("SOURCES/Install.WIM")
	if err != nil {
		t.Fatal(err)
	}
	if r.Size() != 70000 {
		t.Errorf("install.wim is %d bytes, want 70000", r.Size())
	}
	b := make([]byte, 3)
	if _, err := r.ReadAt(b, 69997); err != nil || !bytes.Equal(b, []byte{(69997*7 + 3) % 251, (69998*7 + 3) % 251, (69999*7 + 3) % 251}) {
		t.Errorf("the last bytes of install.wim: %v, %v", b, err)
	}
	if _, err := u.OpenFile("sources"); err == nil {
		t.Error("opened a directory as a file")
	}
	if _, err := u.OpenFile("sources/install.esd"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}

// TestReadsFreshGenisoimageUDF writes a new image with what the fixture
// lacks: a file over many sectors, a directory whose identifiers fill
// several sectors, and names of the longest kind.
func TestReadsFreshGenisoimageUDF(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16+7)
	files := map[string][]byte{"sources/install.wim": big}
	for i := range 120 {
		files[fmt.Sprintf("sources/sxs/microsoft-windows-netfx3-ondemand-package~31bf3856ad364e35~amd64~%03d.cab", i)] = []byte{byte(i)}
	}
	iso := winimagetest.ISO(t, files)
	f, err := os.Open(iso)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, err := Open(f)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	err = fs.WalkDir(u, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(u, p)
		if err != nil {
			return err
		}
		if !bytes.Equal(data, files[p]) {
			t.Errorf("%s: read %d bytes, want %d", p, len(data), len(files[p]))
		}
		got++
		return nil
	})
	if err != nil || got != len(files) {
		t.Errorf("read %d of %d files: %v", got, len(files), err)
	}
	entries, err := fs.ReadDir(u, "sources/sxs")
	if err != nil || len(entries) != 120 {
		t.Errorf("sources/sxs: %d entries, %v", len(entries), err)
	}
}

func TestRefusesWhatIsNotUDF(t *testing.T) {
	// An ISO 9660 image (Rock Ridge + Joliet, hwk's seed writer) has no
	// UDF anchor.
	iso := filepath.Join(t.TempDir(), "seed.iso")
	if err := isoimage.Write(iso, "cidata", []isoimage.File{{Name: "meta-data", Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(iso)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(bytes.NewReader(data)); !errors.Is(err, ErrNotUDF) {
		t.Errorf("an ISO 9660 image: %v, want ErrNotUDF", err)
	}
	if _, err := Open(bytes.NewReader(make([]byte, 100))); err == nil {
		t.Error("a 100-byte file opened as UDF")
	}

	// An anchor whose tag records another location (and so fails its
	// checksum too) is not trusted.
	bad := fixture(t)
	bad[anchorSector*SectorSize+12]++
	if _, err := Open(bytes.NewReader(bad)); !errors.Is(err, ErrNotUDF) {
		t.Errorf("an anchor with the wrong location: %v", err)
	}
}

// TestDamagedFileEntry checks that a file entry whose tag no longer checks
// out is an error naming the file, not garbage data.
func TestDamagedFileEntry(t *testing.T) {
	data := fixture(t)
	u, err := Open(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	nd, err := u.lookup("sources/install.wim")
	if err != nil {
		t.Fatal(err)
	}
	// Find the entry's block: the sector before its data, in
	// genisoimage's layout, is not guaranteed, so search the partition
	// for a File Entry whose size is the file's.
	found := false
	for s := u.partStart; s < u.partStart+u.partLen && !found; s++ {
		b := data[s*SectorSize : (s+1)*SectorSize]
		if tagID(b) == tagFileEntry && int64(le64(b[56:])) == nd.size {
			b[12]++ // the tag's recorded location
			found = true
		}
	}
	if !found {
		t.Fatal("no file entry for install.wim")
	}
	u, err = Open(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	_, err = u.OpenFile("sources/install.wim")
	if err == nil || !strings.Contains(err.Error(), "install.wim") || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a damaged file entry: %v", err)
	}
}

func TestExtentReader(t *testing.T) {
	img := []byte("....AAAA....BBBBBB..")
	r := extentReader{r: bytes.NewReader(img), extents: []extent{
		{offset: 4, length: 4},
		{length: 3, sparse: true},
		{offset: 12, length: 6},
	}}
	got := make([]byte, 13)
	if n, err := r.ReadAt(got, 0); n != 13 || err != nil {
		t.Fatalf("ReadAt: %d, %v", n, err)
	}
	if want := "AAAA\x00\x00\x00BBBBBB"; string(got) != want {
		t.Errorf("read %q, want %q", got, want)
	}
	part := make([]byte, 4)
	if n, err := r.ReadAt(part, 6); n != 4 || err != nil || string(part) != "\x00BBB" {
		t.Errorf("ReadAt 6: %q %d %v", part, n, err)
	}
	if n, err := r.ReadAt(part, 11); n != 2 || err != io.EOF {
		t.Errorf("ReadAt past the end: %d, %v", n, err)
	}
}

func TestDString(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string
		err  bool
	}{
		{[]byte{8, 'a', 'B'}, "aB", false},
		{[]byte{8, 0xe9}, "é", false},
		{[]byte{16, 0x03, 0xa9, 0, 'x'}, "Ωx", false},
		{[]byte{16, 0}, "", true},
		{[]byte{254, 'a'}, "", true},
	} {
		got, err := dstring(c.in)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("dstring(%v) = %q, %v", c.in, got, err)
		}
	}
}
