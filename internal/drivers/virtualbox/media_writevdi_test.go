package virtualbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/hwk-dev/hwk/internal/format/diskimage"
	"github.com/hwk-dev/hwk/internal/testing/vboxtest"
)

// TestReadVDIOfWriteVDI checks that a VDI from diskimage.WriteVDI reads as
// a node image disk: readVDI gets its size and a random (version 4) UUID,
// so the UUID's fields are in RTUUID order, and the header fields hwk and
// vboxtest know sit where vboxtest's stand-in puts them, with the same
// values.
func TestReadVDIOfWriteVDI(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	const size = 7<<20 + 512
	b := make([]byte, size)
	copy(b[3<<20:], "node image data")
	if err := os.WriteFile(raw, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "disk.vdi")
	if err := diskimage.WriteVDI(context.Background(), raw, out); err != nil {
		t.Fatal(err)
	}
	h, err := readVDI(out)
	if err != nil {
		t.Fatal(err)
	}
	if h.Size != size {
		t.Errorf("size %d; want %d", h.Size, size)
	}
	u, err := uuid.Parse(h.UUID)
	if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 {
		t.Errorf("UUID %q (%v) is not a random one", h.UUID, err)
	}
	if err := (&Driver{}).CheckImage(context.Background(), out); err != nil {
		t.Errorf("CheckImage: %v", err)
	}

	ref := filepath.Join(dir, "ref.vdi")
	// vboxtest's cBlocks is whole MiB: one block fewer than the 8 blocks
	// of a disk 512 bytes past 7 MiB, whose last block is partly used.
	vboxtest.WriteVDI(t, ref, h.UUID, size)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name     string
		from, to int
	}{
		{"pre-header, signature, version, header size, type", 0, 0x50},
		{"disk size, block size", 0x170, 0x17c},
		{"creation UUID", 0x188, 0x198},
	} {
		if !bytes.Equal(got[f.from:f.to], want[f.from:f.to]) {
			t.Errorf("%s (%#x-%#x): % x; vboxtest writes % x", f.name, f.from, f.to, got[f.from:f.to], want[f.from:f.to])
		}
	}
}
