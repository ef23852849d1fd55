package diskimage

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// The qcow2 image WriteQCOW2 makes (QEMU's docs/interop/qcow2.txt):
// version 3, 64 KiB clusters, 16-bit refcounts, no backing file, no
// compression, no encryption, no snapshots, no header extensions.
const (
	qcow2Magic         = 0x514649fb // "QFI\xfb"
	qcow2Version       = 3
	qcow2ClusterBits   = 16
	qcow2ClusterSize   = 1 << qcow2ClusterBits
	qcow2RefcountOrder = 4 // 1<<4 bits a refcount
	// qcow2HeaderLength is the version 3 header up to and including the
	// compression type byte and its padding, as QEMU 5.1 and later write
	// it; older QEMUs skip what they do not know of a longer header.
	qcow2HeaderLength = 112
	// qcow2Copied marks an L1 or L2 entry whose cluster has refcount 1,
	// which may be written in place. qemu-img check counts an entry
	// without it, for a cluster of refcount 1, as corruption.
	qcow2Copied = 1 << 63

	qcow2L2Entries       = qcow2ClusterSize / 8
	qcow2RefcountsPerBlk = qcow2ClusterSize * 8 / (1 << qcow2RefcountOrder)
	qcow2RefTableEntries = qcow2ClusterSize / 8
)

// WriteQCOW2 writes out, a qcow2 image of the raw disk at raw, of the
// same virtual size, in one pass over raw's data: clusters of zeros, and
// raw's holes, are left unallocated, so the image takes about as much
// room as the data. raw's size must be a whole number of 512-byte sectors.
// On error out is not left behind.
func WriteQCOW2(ctx context.Context, raw, out string) error {
	// The clusters are laid out header, data, then the metadata: the
	// data's count is known only once raw has been read, and qcow2 puts no
	// metadata at a fixed place except the header. Every cluster is used
	// once, so every refcount is 1.
	if err := writeImage(ctx, raw, out, qcow2ClusterSize, newQCOW2Writer); err != nil {
		return fmt.Errorf("write qcow2 %s: %w", out, err)
	}
	return nil
}

type qcow2Writer struct {
	size int64
	// The header's fields, known once trailer has written the metadata.
	l1Size, l1Off, refTableOff, refTableClusters int64
	// virt holds the virtual cluster index of each data cluster written,
	// ascending: data cluster i is host cluster 1+i.
	virt []int64
}

// qcow2MaxL1Bytes is QEMU's QCOW_MAX_L1_SIZE: it opens no image with a
// larger L1 table, which at 64 KiB clusters is a disk of 2 PiB.
const qcow2MaxL1Bytes = 32 << 20

func newQCOW2Writer(size int64) (imageWriter, error) {
	clusters := (size + qcow2ClusterSize - 1) / qcow2ClusterSize
	if (clusters+qcow2L2Entries-1)/qcow2L2Entries*8 > qcow2MaxL1Bytes {
		return nil, fmt.Errorf("a disk of %d bytes is too large for a qcow2 of %d-byte clusters", size, qcow2ClusterSize)
	}
	return &qcow2Writer{size: size}, nil
}

// reserved returns the size of host cluster 0, the header's.
func (q *qcow2Writer) reserved() int64 { return qcow2ClusterSize }

func (q *qcow2Writer) block(w io.Writer, idx int64, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return err
	}
	q.virt = append(q.virt, idx)
	return nil
}

func (q *qcow2Writer) trailer(w io.Writer) error {
	cs := int64(qcow2ClusterSize)
	virtClusters := (q.size + cs - 1) / cs
	l1Size := (virtClusters + qcow2L2Entries - 1) / qcow2L2Entries
	l1Clusters := (l1Size*8 + cs - 1) / cs

	// One L2 table for each L1 entry that maps any data, in L1 order,
	// after the data.
	next := int64(1 + len(q.virt)) // next free host cluster
	l1 := make([]byte, l1Clusters*cs)
	l2 := make([]byte, cs)
	for i := 0; i < len(q.virt); {
		l1Index := q.virt[i] / qcow2L2Entries
		clear(l2)
		for ; i < len(q.virt) && q.virt[i]/qcow2L2Entries == l1Index; i++ {
			host := uint64(1+i) * uint64(cs)
			binary.BigEndian.PutUint64(l2[(q.virt[i]%qcow2L2Entries)*8:], host|qcow2Copied)
		}
		if _, err := w.Write(l2); err != nil {
			return err
		}
		binary.BigEndian.PutUint64(l1[l1Index*8:], uint64(next*cs)|qcow2Copied)
		next++
	}
	l1Off := next * cs
	if _, err := w.Write(l1); err != nil {
		return err
	}
	next += l1Clusters

	// The refcount table and blocks come last and must count themselves:
	// find the smallest table and block counts that cover every cluster.
	refTableOff := next * cs
	var tableClusters, blocks int64
	for {
		total := next + tableClusters + blocks
		b := (total + qcow2RefcountsPerBlk - 1) / qcow2RefcountsPerBlk
		t := (b + qcow2RefTableEntries - 1) / qcow2RefTableEntries
		if b == blocks && t == tableClusters {
			break
		}
		blocks, tableClusters = b, t
	}
	total := next + tableClusters + blocks
	table := make([]byte, tableClusters*cs)
	firstBlock := next + tableClusters
	for k := range blocks {
		binary.BigEndian.PutUint64(table[k*8:], uint64((firstBlock+k)*cs))
	}
	if _, err := w.Write(table); err != nil {
		return err
	}
	block := make([]byte, cs)
	for k := range blocks {
		clear(block)
		for c := k * qcow2RefcountsPerBlk; c < min(total, (k+1)*qcow2RefcountsPerBlk); c++ {
			binary.BigEndian.PutUint16(block[(c%qcow2RefcountsPerBlk)*2:], 1)
		}
		if _, err := w.Write(block); err != nil {
			return err
		}
	}
	q.l1Size, q.l1Off, q.refTableOff, q.refTableClusters = l1Size, l1Off, refTableOff, tableClusters
	return nil
}

func (q *qcow2Writer) head(f *os.File) error {
	h := make([]byte, qcow2HeaderLength)
	be := binary.BigEndian
	be.PutUint32(h[0:], qcow2Magic)
	be.PutUint32(h[4:], qcow2Version)
	// 8: backing file offset, 16: its length: none.
	be.PutUint32(h[20:], qcow2ClusterBits)
	be.PutUint64(h[24:], uint64(q.size))
	// 32: encryption method: none.
	be.PutUint32(h[36:], uint32(q.l1Size))
	be.PutUint64(h[40:], uint64(q.l1Off))
	be.PutUint64(h[48:], uint64(q.refTableOff))
	be.PutUint32(h[56:], uint32(q.refTableClusters))
	// 60: snapshot count, 64: snapshot table offset: none. 72, 80, 88:
	// incompatible, compatible and autoclear features: none (so no dirty
	// bit, no lazy refcounts, no external data file).
	be.PutUint32(h[96:], qcow2RefcountOrder)
	be.PutUint32(h[100:], qcow2HeaderLength)
	// 104: compression type 0 (zlib, unused here), then padding. The
	// header extensions' end marker (type 0, length 0) that follows is
	// the zeros already there.
	_, err := f.WriteAt(h, 0)
	return err
}
