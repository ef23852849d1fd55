package diskimage

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"unicode/utf16"

	"github.com/google/uuid"
)

// The VHDX image WriteVHDX makes ([MS-VHDX] v20160714): dynamic, 1 MiB
// blocks (what qemuArgs asked qemu-img for), 512-byte logical and
// 4096-byte physical sectors, an empty 1 MiB log, no parent. The file is
// laid out in whole MiB: the header section, the log, the metadata
// region, the BAT, then the data blocks in the order of the disk.
const (
	vhdxBlockSize = 1 << 20
	// vhdxHeaderSection holds the file type identifier, the two headers
	// and the two region tables, each 64 KiB apart (section 2.2).
	vhdxHeaderSection = 1 << 20
	vhdxLogOffset     = 1 << 20
	vhdxLogLength     = 1 << 20
	vhdxMetaOffset    = vhdxLogOffset + vhdxLogLength
	vhdxMetaLength    = 1 << 20
	vhdxBATOffset     = vhdxMetaOffset + vhdxMetaLength
	// vhdxChunkRatio is the payload blocks per sector bitmap block:
	// 2^23 sectors of 512 bytes a chunk, over the block size (2.4).
	vhdxChunkRatio = (1 << 23) * sectorSize / vhdxBlockSize
	// vhdxMaxSize is the largest virtual disk the format allows (2.6.2.2).
	vhdxMaxSize = 64 << 40

	// Payload BAT entry states (2.5.1.1). A block of zeros is ZERO, not
	// NOT_PRESENT: a dynamic VHDX may read a NOT_PRESENT block as
	// anything, and the file systems on these disks rely on zeros where
	// nothing was written (ext4's inode tables). qemu-img convert writes
	// ZERO too (its block_state_zero, on by default).
	vhdxBlockZero         = 2
	vhdxBlockFullyPresent = 6
)

// The region and metadata item GUIDs (sections 2.2.3.2 and 2.6.2).
var (
	vhdxBATRegion        = uuid.MustParse("2DC27766-F623-4200-9D64-115E9BFD4A08")
	vhdxMetadataRegion   = uuid.MustParse("8B7CA206-4790-4B9A-B8FE-575F050F886E")
	vhdxFileParameters   = uuid.MustParse("CAA16737-FA36-4D43-B3B6-33F0AA44E76B")
	vhdxVirtualDiskSize  = uuid.MustParse("2FA54224-CD1B-4876-B211-5DBED83BF4B8")
	vhdxVirtualDiskID    = uuid.MustParse("BECA12AB-B2E6-4523-93EF-C309E000C746")
	vhdxLogicalSector    = uuid.MustParse("8141BF1D-A96F-4709-BA47-F233A8FAAB5F")
	vhdxPhysicalSector   = uuid.MustParse("CDA348C7-445D-4471-9CC9-E9885251C556")
	vhdxCRC32C           = crc32.MakeTable(crc32.Castagnoli)
	vhdxPhysicalSectorSz = uint32(4096)
)

// WriteVHDX writes out, a dynamic VHDX image of the raw disk at raw (what
// Hyper-V boots), of the same virtual size, in one pass over raw's data;
// only the 1 MiB blocks holding a non-zero byte take room, the others are
// marked as reading zeros. raw's size must be a whole number of 512-byte
// sectors. On error out is not left behind.
func WriteVHDX(ctx context.Context, raw, out string) error {
	if err := writeImage(ctx, raw, out, vhdxBlockSize, newVHDXWriter); err != nil {
		return fmt.Errorf("write vhdx %s: %w", out, err)
	}
	return nil
}

type vhdxWriter struct {
	size    int64
	dataOff int64
	batLen  int64
	// bat is the block allocation table, payload and sector bitmap
	// entries interleaved (2.5).
	bat       []byte
	allocated int64
}

func newVHDXWriter(size int64) (imageWriter, error) {
	if size > vhdxMaxSize {
		return nil, fmt.Errorf("a disk of %d bytes is larger than a VHDX can be (64 TiB)", size)
	}
	blocks := (size + vhdxBlockSize - 1) / vhdxBlockSize
	// A dynamic VHDX's BAT ends with the last payload block's entry
	// (2.5): a sector bitmap entry after every vhdxChunkRatio of them.
	entries := blocks + (blocks-1)/vhdxChunkRatio
	batLen := roundUp(entries*8, 1<<20)
	v := &vhdxWriter{size: size, dataOff: vhdxBATOffset + batLen, batLen: batLen, bat: make([]byte, batLen)}
	for i := range blocks {
		binary.LittleEndian.PutUint64(v.bat[vhdxBATIndex(i)*8:], vhdxBlockZero)
	}
	return v, nil
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// vhdxBATIndex returns the index of payload block i's entry in the BAT.
func vhdxBATIndex(i int64) int64 { return i + i/vhdxChunkRatio }

// reserved returns the size of the header section, log, metadata region
// and BAT.
func (v *vhdxWriter) reserved() int64 { return v.dataOff }

func (v *vhdxWriter) block(w io.Writer, idx int64, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return err
	}
	off := v.dataOff + v.allocated*vhdxBlockSize
	binary.LittleEndian.PutUint64(v.bat[vhdxBATIndex(idx)*8:], vhdxBlockFullyPresent|uint64(off>>20)<<20)
	v.allocated++
	return nil
}

func (v *vhdxWriter) trailer(io.Writer) error { return nil }

func (v *vhdxWriter) head(f *os.File) error {
	le := binary.LittleEndian
	hs := make([]byte, vhdxHeaderSection)

	// The file type identifier (2.2.1): the signature, then who made it,
	// in UTF-16.
	copy(hs, "vhdxfile")
	for i, c := range utf16.Encode([]rune("hwk")) {
		le.PutUint16(hs[8+2*i:], c)
	}

	// Two headers (2.2.2), the same except for their sequence numbers: the
	// one with the larger is current, and either alone opens the file.
	fileWrite, dataWrite := uuid.New(), uuid.New()
	for i, at := range []int{64 << 10, 128 << 10} {
		h := hs[at : at+4096]
		copy(h, "head")
		le.PutUint64(h[8:], uint64(i+1))
		putRTUUID(h[16:], fileWrite)
		putRTUUID(h[32:], dataWrite)
		// 48: the log GUID, zero: the log is empty and not replayed.
		le.PutUint16(h[64:], 0) // log version
		le.PutUint16(h[66:], 1) // version
		le.PutUint32(h[68:], vhdxLogLength)
		le.PutUint64(h[72:], vhdxLogOffset)
		le.PutUint32(h[4:], crc32.Checksum(h, vhdxCRC32C))
	}

	// Two copies of the region table (2.2.3): the BAT and the metadata
	// region, both required.
	rt := make([]byte, 64<<10)
	copy(rt, "regi")
	le.PutUint32(rt[8:], 2)
	for i, r := range []struct {
		id     uuid.UUID
		off, n int64
	}{{vhdxBATRegion, vhdxBATOffset, v.batLen}, {vhdxMetadataRegion, vhdxMetaOffset, vhdxMetaLength}} {
		e := rt[16+32*i:]
		putRTUUID(e, r.id)
		le.PutUint64(e[16:], uint64(r.off))
		le.PutUint32(e[24:], uint32(r.n))
		le.PutUint32(e[28:], 1)
	}
	le.PutUint32(rt[4:], crc32.Checksum(rt, vhdxCRC32C))
	copy(hs[192<<10:], rt)
	copy(hs[256<<10:], rt)

	// The metadata region (2.6): a 64 KiB table, then the items. Flags:
	// bit 1 IsVirtualDisk, bit 2 IsRequired; an implementation must
	// refuse a file with a required item it does not know, and these
	// are the ones every reader knows.
	const isVirtualDisk, isRequired = 1 << 1, 1 << 2
	md := make([]byte, vhdxMetaLength)
	copy(md, "metadata")
	items := []struct {
		id    uuid.UUID
		flags uint32
		data  []byte
	}{
		// Block size; flags 0: blocks may be unallocated, no parent.
		{vhdxFileParameters, isRequired, le.AppendUint32(le.AppendUint32(nil, vhdxBlockSize), 0)},
		{vhdxVirtualDiskSize, isVirtualDisk | isRequired, le.AppendUint64(nil, uint64(v.size))},
		{vhdxVirtualDiskID, isVirtualDisk | isRequired, guidBytes(uuid.New())},
		{vhdxLogicalSector, isVirtualDisk | isRequired, le.AppendUint32(nil, sectorSize)},
		{vhdxPhysicalSector, isVirtualDisk | isRequired, le.AppendUint32(nil, vhdxPhysicalSectorSz)},
	}
	le.PutUint16(md[10:], uint16(len(items)))
	off := 64 << 10
	for i, it := range items {
		e := md[32+32*i:]
		putRTUUID(e, it.id)
		le.PutUint32(e[16:], uint32(off))
		le.PutUint32(e[20:], uint32(len(it.data)))
		le.PutUint32(e[24:], it.flags)
		off += copy(md[off:], it.data)
	}

	for _, w := range []struct {
		b   []byte
		off int64
	}{{hs, 0}, {md, vhdxMetaOffset}, {v.bat, vhdxBATOffset}} {
		if _, err := f.WriteAt(w.b, w.off); err != nil {
			return err
		}
	}
	return nil
}

// guidBytes returns u in the byte order putRTUUID writes, which is also how
// [MS-VHDX] stores a GUID.
func guidBytes(u uuid.UUID) []byte {
	b := make([]byte, 16)
	putRTUUID(b, u)
	return b
}
