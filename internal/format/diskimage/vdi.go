package diskimage

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/google/uuid"
)

// The VDI image WriteVDI makes (VirtualBox's src/VBox/Storage/VDICore.h):
// header version 1.1, dynamic, 1 MiB blocks, no parent. The header is the
// 0x180-byte one QEMU writes, without the logical geometry that
// VirtualBox's own 0x190-byte one adds; VirtualBox works that out itself.
const (
	vdiPreHeaderText = "<<< Oracle VM VirtualBox Disk Image >>>\n"
	vdiSignature     = 0xbeda107f
	vdiVersion       = 0x00010001 // 1.1
	vdiHeaderSize    = 0x180
	vdiTypeDynamic   = 1
	vdiBlockSize     = 1 << 20
	// vdiBlockFree marks a block with no room in the file, read as zeros.
	vdiBlockFree = 0xffffffff
	// vdiMapOffset is where the block map starts, right after the
	// pre-header (0x48 bytes) and header, on a sector, as QEMU puts it.
	vdiMapOffset = 0x200
	// vdiDataAlign is VirtualBox's VDI_DATA_ALIGN: the data starts 1 MiB
	// aligned so that blocks sit on the host's pages and SSD pages.
	vdiDataAlign = 1 << 20
)

// WriteVDI writes out, a dynamic VirtualBox VDI image of the raw disk at
// raw, of the same virtual size, with random creation and modification
// UUIDs, in one pass over raw's data; only the 1 MiB blocks holding a
// non-zero byte take room. raw's size must be a whole number of 512-byte
// sectors, not necessarily of blocks. On error out is not left behind.
func WriteVDI(ctx context.Context, raw, out string) error {
	// Why any whole number of sectors: the header's disk size is then less
	// than its blocks cover, which VirtualBox and QEMU accept, and qemu-img
	// convert writes the same.
	if err := writeImage(ctx, raw, out, vdiBlockSize, newVDIWriter); err != nil {
		return fmt.Errorf("write vdi %s: %w", out, err)
	}
	return nil
}

type vdiWriter struct {
	size    int64
	blocks  int64
	dataOff int64
	// bmap is the block map: for each virtual block, its index among the
	// blocks in the file, or vdiBlockFree.
	bmap      []byte
	allocated uint32
}

func newVDIWriter(size int64) (imageWriter, error) {
	blocks := (size + vdiBlockSize - 1) / vdiBlockSize
	dataOff := roundUp(vdiMapOffset+blocks*4, vdiDataAlign)
	// The header keeps the block count and data offset in 32 bits.
	if dataOff > 1<<32-1 {
		return nil, fmt.Errorf("a disk of %d bytes is too large for a VDI of %d-byte blocks", size, vdiBlockSize)
	}
	bmap := make([]byte, blocks*4)
	for i := range blocks {
		binary.LittleEndian.PutUint32(bmap[i*4:], vdiBlockFree)
	}
	return &vdiWriter{size: size, blocks: blocks, dataOff: dataOff, bmap: bmap}, nil
}

// reserved returns the size of the header and the block map.
func (v *vdiWriter) reserved() int64 { return v.dataOff }

func (v *vdiWriter) block(w io.Writer, idx int64, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(v.bmap[idx*4:], v.allocated)
	v.allocated++
	return nil
}

func (v *vdiWriter) trailer(io.Writer) error { return nil }

func (v *vdiWriter) head(f *os.File) error {
	h := make([]byte, vdiMapOffset)
	le := binary.LittleEndian
	copy(h, vdiPreHeaderText)
	le.PutUint32(h[0x40:], vdiSignature)
	le.PutUint32(h[0x44:], vdiVersion)
	le.PutUint32(h[0x48:], vdiHeaderSize)
	le.PutUint32(h[0x4c:], vdiTypeDynamic)
	// 0x50: flags, 0x54: comment (256 bytes): none.
	le.PutUint32(h[0x154:], vdiMapOffset)
	le.PutUint32(h[0x158:], uint32(v.dataOff))
	// 0x15c: the legacy geometry's cylinders, heads and sectors, left 0
	// for the reader to work out, as QEMU leaves them; then the sector
	// size.
	le.PutUint32(h[0x168:], sectorSize)
	le.PutUint64(h[0x170:], uint64(v.size))
	le.PutUint32(h[0x178:], vdiBlockSize)
	// 0x17c: extra bytes before each block: none.
	le.PutUint32(h[0x180:], uint32(v.blocks))
	le.PutUint32(h[0x184:], v.allocated)
	// 0x188: creation UUID, 0x198: modification UUID. 0x1a8 and 0x1b8,
	// the parent's UUIDs, stay zero: this is a base image.
	putRTUUID(h[0x188:], uuid.New())
	putRTUUID(h[0x198:], uuid.New())
	if _, err := f.WriteAt(h, 0); err != nil {
		return err
	}
	_, err := f.WriteAt(v.bmap, vdiMapOffset)
	return err
}

// putRTUUID writes u as VirtualBox's RTUUID, whose first three fields are
// little-endian, so that VirtualBox shows the UUID u.String() gives.
func putRTUUID(b []byte, u uuid.UUID) {
	copy(b, u[:])
	b[0], b[1], b[2], b[3] = u[3], u[2], u[1], u[0]
	b[4], b[5] = u[5], u[4]
	b[6], b[7] = u[7], u[6]
}
