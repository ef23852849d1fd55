package diskimage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/hwk-dev/hwk/internal/state"
)

// sectorSize is the unit of a disk's size. QEMU keeps disk sizes in
// 512-byte sectors and rounds a raw file's size up to one, so a qcow2 or
// VDI of any other size would not read back as the raw file it came from.
const sectorSize = 512

// checkRawSize returns an error unless size is one the image writers
// take: not empty, and a whole number of sectors.
func checkRawSize(size int64) error {
	if size <= 0 {
		return errors.New("the raw disk is empty")
	}
	if size%sectorSize != 0 {
		return fmt.Errorf("the raw disk's size, %d bytes, is not a whole number of %d-byte sectors (QEMU would round it up, so the image would not match the raw disk)", size, sectorSize)
	}
	return nil
}

// imageWriter is one format's side of writeImage.
type imageWriter interface {
	// reserved is how many bytes come before the first block: written
	// as zeros first, and filled in by head.
	reserved() int64
	// block writes the next non-zero block, of virtual index idx.
	block(w io.Writer, idx int64, b []byte) error
	// trailer writes what follows the data, once every block is written.
	trailer(w io.Writer) error
	// head writes what comes before the data, at f's start, last: it
	// counts what the others wrote.
	head(f *os.File) error
}

// writeImage reads raw's non-zero blocks of bs bytes and has the writer
// made by newWriter, given raw's size, write them to out, under a
// temporary name beside it renamed at the end.
func writeImage(ctx context.Context, raw, out string, bs int, newWriter func(size int64) (imageWriter, error)) error {
	in, err := os.Open(raw)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", raw)
	}
	size := fi.Size()
	if err := checkRawSize(size); err != nil {
		return fmt.Errorf("%s: %w", raw, err)
	}
	iw, err := newWriter(size)
	if err != nil {
		return err
	}
	exts, err := dataExtents(in, size)
	if err != nil {
		return err
	}
	// A disk is as readable as the other build outputs (a hypervisor's
	// user may need to read it).
	return state.WriteOutput(out, 0o644, func(f *os.File) error {
		// Everything except the head goes out in order, so through one
		// buffer.
		w := bufio.NewWriterSize(f, 1<<20)
		if _, err := w.Write(make([]byte, iw.reserved())); err != nil {
			return err
		}
		if err := scanBlocks(ctx, in, size, bs, exts, func(idx int64, b []byte) error {
			return iw.block(w, idx, b)
		}); err != nil {
			return err
		}
		if err := iw.trailer(w); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		return iw.head(f)
	})
}
