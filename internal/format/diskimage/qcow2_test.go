package diskimage

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// skipWriter writes through to f, except data clusters, which it skips,
// leaving holes: the image's metadata can then be checked for more data
// than a test could write.
type skipWriter struct {
	f    *os.File
	skip bool
}

func (s *skipWriter) Write(p []byte) (int, error) {
	if s.skip {
		if _, err := s.f.Seek(int64(len(p)), io.SeekCurrent); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return s.f.Write(p)
}

// TestQCOW2LargeMetadata checks that the metadata of an image larger than
// the other tests', with several L1 table clusters (8 TiB: 16384 L1
// entries), many L2 tables and several refcount blocks (70000 data
// clusters, 4.3 GiB, where one block counts 32768), is whole to qemu-img.
func TestQCOW2LargeMetadata(t *testing.T) {
	requireOracles(t, "qemu-img")
	const size = 8 << 40
	q := &qcow2Writer{size: size}
	path := filepath.Join(t.TempDir(), "big.qcow2")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Else NTFS would fill the skipped 4.3 GiB with zeros.
	if err := makeSparse(f); err != nil {
		t.Fatal(err)
	}
	w := &skipWriter{f: f}
	if _, err := w.Write(make([]byte, q.reserved())); err != nil {
		t.Fatal(err)
	}
	w.skip = true
	cluster := make([]byte, qcow2ClusterSize)
	const data = 70000
	// Spread over the disk, some L2 tables full and most with a few
	// entries, the last cluster included.
	virtClusters := int64(size / qcow2ClusterSize)
	for i := range int64(data) {
		idx := i
		if i >= 20000 {
			idx = 20000 + (i-20000)*((virtClusters-20001)/(data-20001))
		}
		if i == data-1 {
			idx = virtClusters - 1
		}
		if err := q.block(w, idx, cluster); err != nil {
			t.Fatal(err)
		}
	}
	w.skip = false
	if err := q.trailer(w); err != nil {
		t.Fatal(err)
	}
	if err := q.head(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if q.refTableClusters != 1 || q.l1Size != 16384 {
		t.Errorf("refcount table clusters %d, L1 entries %d; want 1, 16384", q.refTableClusters, q.l1Size)
	}
	out, code := qemuImg(t, "check", "--output=json", "-f", "qcow2", path)
	if code != 0 {
		t.Fatalf("qemu-img check: exit %d (2: corrupt, 3: leaks)\n%s", code, out)
	}
	t.Logf("qemu-img check: %s", out)
	out, code = qemuImg(t, "info", "--output=json", "-f", "qcow2", path)
	if code != 0 {
		t.Fatalf("qemu-img info: exit %d\n%s", code, out)
	}
}

// TestImageTooLarge checks that a disk too large for the format's header
// or for QEMU is refused before anything is allocated for it.
func TestImageTooLarge(t *testing.T) {
	if _, err := newQCOW2Writer(3 << 50); err == nil {
		t.Error("qcow2 of 3 PiB: no error")
	}
	if _, err := newQCOW2Writer(2 << 50); err != nil {
		t.Errorf("qcow2 of 2 PiB: %v", err)
	}
	if _, err := newVDIWriter(2 << 50); err == nil {
		t.Error("VDI of 2 PiB: no error")
	}
	if _, err := newVHDXWriter(64<<40 + sectorSize); err == nil {
		t.Error("VHDX of 64 TiB and a sector: no error")
	}
	if _, err := newVHDXWriter(1 << 40); err != nil {
		t.Errorf("VHDX of 1 TiB: %v", err)
	}
}
