package diskimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// extent is a byte range of a file that may hold data.
type extent struct {
	off, len int64
}

// scanBlocks calls fn, in order, for each block of bs bytes of f (whose
// size is size) that holds a non-zero byte, with the block's index and
// its bytes; the last block is padded with zeros. Only the blocks that
// meet exts are read: the rest is taken to be zeros. fn must not keep b.
func scanBlocks(ctx context.Context, f *os.File, size int64, bs int, exts []extent, fn func(idx int64, b []byte) error) error {
	buf := make([]byte, bs)
	zero := make([]byte, bs)
	next := int64(0) // the first block not yet looked at
	for _, e := range exts {
		first := max(e.off/int64(bs), next)
		end := min((e.off+e.len+int64(bs)-1)/int64(bs), (size+int64(bs)-1)/int64(bs))
		for idx := first; idx < end; idx++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			n, err := f.ReadAt(buf, idx*int64(bs))
			if err != nil && !(errors.Is(err, io.EOF) && idx*int64(bs)+int64(n) == size) {
				return fmt.Errorf("read %s at %d: %w", f.Name(), idx*int64(bs), err)
			}
			clear(buf[n:])
			// Why check inside an extent: a file system reports as data
			// whatever was ever written, and a disk writer zeroes a lot
			// (inode tables, the journal) that needs no room in the image.
			if bytes.Equal(buf, zero) {
				continue
			}
			if err := fn(idx, buf); err != nil {
				return err
			}
		}
		next = max(next, end)
	}
	return nil
}

// wholeFile returns the extent list that makes scanBlocks read everything.
func wholeFile(size int64) []extent { return []extent{{0, size}} }
