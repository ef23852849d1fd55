package debtest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
)

// StoredXZ wraps data in an xz container without compressing it: one
// block of LZMA2 "uncompressed" chunks, CRC32 check. Any xz decoder
// (dpkg's, xi2/xz) reads it, and it needs no xz encoder, which neither the
// standard library nor klauspost/compress has. Test .debs are small, so
// the size does not matter; the decoder path taken is the real one.
func StoredXZ(data []byte) []byte {
	le32 := func(b *bytes.Buffer, v uint32) { _ = binary.Write(b, binary.LittleEndian, v) }
	varint := func(b *bytes.Buffer, v uint64) {
		for v >= 0x80 {
			b.WriteByte(byte(v) | 0x80)
			v >>= 7
		}
		b.WriteByte(byte(v))
	}
	pad4 := func(b *bytes.Buffer, n int) {
		for n%4 != 0 {
			b.WriteByte(0)
			n++
		}
	}
	var out bytes.Buffer
	flags := []byte{0x00, 0x01} // check type 1: CRC32
	out.Write([]byte{0xFD, '7', 'z', 'X', 'Z', 0x00})
	out.Write(flags)
	le32(&out, crc32.ChecksumIEEE(flags))

	// Block header: size, flags (one filter, no sizes), LZMA2 filter with
	// a 1 MiB dictionary, padding, CRC32.
	var hdr bytes.Buffer
	hdr.Write([]byte{0, 0x00, 0x21, 0x01, 16})
	pad4(&hdr, hdr.Len())
	h := hdr.Bytes()
	h[0] = byte((len(h)+4)/4 - 1)
	out.Write(h)
	le32(&out, crc32.ChecksumIEEE(h))
	headerSize := len(h) + 4

	var body bytes.Buffer
	for i := 0; i < len(data); i += 1 << 16 {
		chunk := data[i:min(i+1<<16, len(data))]
		control := byte(0x02) // uncompressed, keep the dictionary
		if i == 0 {
			control = 0x01 // uncompressed, reset the dictionary
		}
		body.WriteByte(control)
		_ = binary.Write(&body, binary.BigEndian, uint16(len(chunk)-1))
		body.Write(chunk)
	}
	body.WriteByte(0x00) // end of LZMA2 data
	out.Write(body.Bytes())
	pad4(&out, headerSize+body.Len())
	le32(&out, crc32.ChecksumIEEE(data))
	unpadded := uint64(headerSize + body.Len() + 4)

	var index bytes.Buffer
	index.WriteByte(0x00)
	varint(&index, 1)
	varint(&index, unpadded)
	varint(&index, uint64(len(data)))
	pad4(&index, index.Len())
	le32(&index, crc32.ChecksumIEEE(index.Bytes()))
	out.Write(index.Bytes())

	var footer bytes.Buffer
	le32(&footer, uint32(index.Len()/4-1))
	footer.Write(flags)
	le32(&out, crc32.ChecksumIEEE(footer.Bytes()))
	out.Write(footer.Bytes())
	out.Write([]byte{'Y', 'Z'})
	return out.Bytes()
}
