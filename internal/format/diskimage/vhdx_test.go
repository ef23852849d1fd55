package diskimage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf16"

	"github.com/google/uuid"
)

// TestWriteVHDXLayout checks WriteVHDX's output field by field, as
// [MS-VHDX] lays it out, for what QEMU does not check but Hyper-V reads:
// both headers' and region tables' CRC-32C, the log fields, the regions'
// required flags, the metadata items' flags and values, and the BAT's
// states, with the sector bitmap entry after each 4096 payload entries.
func TestWriteVHDXLayout(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	// 4 GiB and 2 MiB: payload blocks 0..4097, so the BAT has the
	// sector bitmap entry at 4096 and the payload entries around it.
	size := int64(4<<30 + 2*mibBytes)
	r := rand.New(rand.NewPCG(3, 4))
	makeRaw(t, raw, size, []dataRun{
		{0, pseudoRandom(r, 4096)},
		{4095 * mibBytes, pseudoRandom(r, 100)},
		{4096 * mibBytes, pseudoRandom(r, 100)},
		{size - 512, pseudoRandom(r, 512)},
	})
	out := filepath.Join(dir, "disk.vhdx")
	if err := WriteVHDX(context.Background(), raw, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	crc := func(p []byte, at int) uint32 {
		c := bytes.Clone(p)
		le.PutUint32(c[at:], 0)
		return crc32.Checksum(c, crc32.MakeTable(crc32.Castagnoli))
	}
	guid := rtUUID // VHDX stores GUIDs as VirtualBox does

	if string(b[:8]) != "vhdxfile" {
		t.Errorf("file type identifier %q", b[:8])
	}
	creator := make([]uint16, 3)
	for i := range creator {
		creator[i] = le.Uint16(b[8+2*i:])
	}
	if got := string(utf16.Decode(creator)); got != "hwk" {
		t.Errorf("creator %q", got)
	}

	var writeGUIDs []uuid.UUID
	for i, at := range []int{64 << 10, 128 << 10} {
		h := b[at : at+4096]
		if string(h[:4]) != "head" || le.Uint32(h[4:]) != crc(h, 4) {
			t.Errorf("header %d: signature %q, checksum %#x, want %#x", i+1, h[:4], le.Uint32(h[4:]), crc(h, 4))
		}
		if seq := le.Uint64(h[8:]); seq != uint64(i+1) {
			t.Errorf("header %d: sequence number %d", i+1, seq)
		}
		if g := guid(h[48:]); g != uuid.Nil {
			t.Errorf("header %d: log GUID %s, want zero (no log to replay)", i+1, g)
		}
		if lv, v, ll, lo := le.Uint16(h[64:]), le.Uint16(h[66:]), le.Uint32(h[68:]), le.Uint64(h[72:]); lv != 0 || v != 1 || ll != 1<<20 || lo != 1<<20 {
			t.Errorf("header %d: log version %d, version %d, log %d bytes at %d", i+1, lv, v, ll, lo)
		}
		if !bytes.Equal(h[80:], make([]byte, 4096-80)) {
			t.Errorf("header %d: reserved bytes are not zero", i+1)
		}
		writeGUIDs = append(writeGUIDs, guid(h[16:]), guid(h[32:]))
	}
	if writeGUIDs[0] != writeGUIDs[2] || writeGUIDs[1] != writeGUIDs[3] || writeGUIDs[0] == uuid.Nil || writeGUIDs[0] == writeGUIDs[1] {
		t.Errorf("file and data write GUIDs %v", writeGUIDs)
	}

	rt := b[192<<10 : 256<<10]
	if !bytes.Equal(rt, b[256<<10:320<<10]) {
		t.Error("the two region tables differ")
	}
	if string(rt[:4]) != "regi" || le.Uint32(rt[4:]) != crc(rt, 4) || le.Uint32(rt[8:]) != 2 {
		t.Errorf("region table: signature %q, checksum %#x (want %#x), %d entries", rt[:4], le.Uint32(rt[4:]), crc(rt, 4), le.Uint32(rt[8:]))
	}
	regions := map[uuid.UUID][2]uint64{}
	for i := range 2 {
		e := rt[16+32*i:]
		if le.Uint32(e[28:]) != 1 {
			t.Errorf("region %s is not required", guid(e))
		}
		regions[guid(e)] = [2]uint64{le.Uint64(e[16:]), uint64(le.Uint32(e[24:]))}
	}
	batAt, batLen := regions[vhdxBATRegion][0], regions[vhdxBATRegion][1]
	mdAt, mdLen := regions[vhdxMetadataRegion][0], regions[vhdxMetadataRegion][1]
	if mdAt != 2<<20 || mdLen != 1<<20 || batAt != 3<<20 || batLen != 1<<20 {
		t.Fatalf("regions: metadata %d bytes at %d, BAT %d bytes at %d", mdLen, mdAt, batLen, batAt)
	}

	md := b[mdAt : mdAt+mdLen]
	if string(md[:8]) != "metadata" || le.Uint16(md[10:]) != 5 {
		t.Fatalf("metadata table: signature %q, %d entries", md[:8], le.Uint16(md[10:]))
	}
	type item struct {
		flags uint32
		data  []byte
	}
	items := map[uuid.UUID]item{}
	for i := range 5 {
		e := md[32+32*i:]
		off, n := le.Uint32(e[16:]), le.Uint32(e[20:])
		if off < 64<<10 {
			t.Errorf("metadata item %s at %d, inside the table", guid(e), off)
		}
		items[guid(e)] = item{le.Uint32(e[24:]), md[off : off+n]}
	}
	const virtualDisk, required = 1 << 1, 1 << 2
	for _, want := range []struct {
		name  string
		id    uuid.UUID
		flags uint32
		value uint64
	}{
		{"block size", vhdxFileParameters, required, 1 << 20},
		{"virtual disk size", vhdxVirtualDiskSize, virtualDisk | required, uint64(size)},
		{"logical sector size", vhdxLogicalSector, virtualDisk | required, 512},
		{"physical sector size", vhdxPhysicalSector, virtualDisk | required, 4096},
	} {
		it, ok := items[want.id]
		var got uint64
		switch {
		case !ok:
			t.Errorf("no %s item", want.name)
			continue
		case len(it.data) == 4:
			got = uint64(le.Uint32(it.data))
		case len(it.data) == 8 && want.id == vhdxFileParameters:
			got = uint64(le.Uint32(it.data))
			if flags := le.Uint32(it.data[4:]); flags != 0 {
				t.Errorf("file parameters flags %#x, want 0 (dynamic, no parent)", flags)
			}
		default:
			got = le.Uint64(it.data)
		}
		if got != want.value || it.flags != want.flags {
			t.Errorf("%s: %d, flags %#x; want %d, %#x", want.name, got, it.flags, want.value, want.flags)
		}
	}
	if it := items[vhdxVirtualDiskID]; len(it.data) != 16 || guid(it.data) == uuid.Nil || it.flags != virtualDisk|required {
		t.Errorf("virtual disk ID %x, flags %#x", it.data, it.flags)
	}

	// Payload blocks 0, 4095, 4096 and 4097 hold data; the BAT has 4098
	// payload entries and one sector bitmap entry, at 4096.
	bat := b[batAt : batAt+batLen]
	entry := func(i int) (state uint64, offMB uint64) {
		e := le.Uint64(bat[8*i:])
		return e & 7, e >> 20
	}
	dataAt := uint64(4) // MiB: header section, log, metadata, BAT
	for i, want := range map[int]uint64{0: 6, 1: 2, 4094: 2, 4095: 6, 4096: 0, 4097: 6, 4098: 6, 4099: 0} {
		state, off := entry(i)
		if state != want {
			t.Errorf("BAT entry %d: state %d, want %d", i, state, want)
		}
		if state == 6 && (off < dataAt || off*mibBytes >= uint64(len(b))) {
			t.Errorf("BAT entry %d: block at %d MiB, outside the data", i, off)
		}
		if state != 6 && off != 0 {
			t.Errorf("BAT entry %d: state %d with an offset, %d MiB", i, state, off)
		}
	}
	// What QEMU reads around the chunk's end and at the disk's end is
	// the raw disk's bytes. (qemu-img compare of the whole disk would
	// read 4 GiB through QEMU's VHDX driver, which reports nothing of
	// what is allocated: minutes.)
	requireOracles(t, "qemu-img")
	part := filepath.Join(dir, "part.raw")
	from := int64(4094 * mibBytes)
	opts := fmt.Sprintf("driver=raw,offset=%d,size=%d,file.driver=vhdx,file.file.driver=file,file.file.filename=%s", from, size-from, out)
	if out, code := qemuImg(t, "convert", "-O", "raw", "--image-opts", opts, part); code != 0 {
		t.Fatalf("qemu-img convert of %d bytes from %d: exit %d\n%s", size-from, from, code, out)
	}
	got, err := os.ReadFile(part)
	if err != nil {
		t.Fatal(err)
	}
	rf, err := os.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	want := make([]byte, size-from)
	if _, err := rf.ReadAt(want, from); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("QEMU reads %d bytes from 4094 MiB on that are not the raw disk's %d", len(got), len(want))
	}
	if n := vhdxPresentBlocks(t, out); n != 4 {
		t.Errorf("%d blocks present, want 4", n)
	}
}

// vhdxPresentBlocks counts the payload blocks image's BAT marks present in
// the file, finding the BAT through the region table.
func vhdxPresentBlocks(t testing.TB, image string) int64 {
	t.Helper()
	f, err := os.Open(image)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rt := make([]byte, 64<<10)
	if _, err := f.ReadAt(rt, 192<<10); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	for i := range int(le.Uint32(rt[8:])) {
		e := rt[16+32*i:]
		if rtUUID(e) != vhdxBATRegion {
			continue
		}
		bat := make([]byte, le.Uint32(e[24:]))
		if _, err := f.ReadAt(bat, int64(le.Uint64(e[16:]))); err != nil {
			t.Fatal(err)
		}
		n := int64(0)
		for j := 0; j < len(bat); j += 8 {
			if le.Uint64(bat[j:])&7 == vhdxBlockFullyPresent {
				n++
			}
		}
		return n
	}
	t.Fatalf("%s has no BAT region", image)
	return 0
}
