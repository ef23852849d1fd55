//go:build linux || darwin || freebsd

package diskimage

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// dataExtents returns where f (size bytes long) may hold data, from the
// file system's own record of its holes (lseek SEEK_DATA and SEEK_HOLE),
// so that a mostly empty 20 GiB disk is read for its data only. Where the
// file system cannot tell, the whole file is one extent.
func dataExtents(f *os.File, size int64) ([]extent, error) {
	var exts []extent
	for pos := int64(0); pos < size; {
		start, err := unix.Seek(int(f.Fd()), pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			// No data at or after pos.
			break
		}
		if err != nil {
			if pos == 0 && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP)) {
				return wholeFile(size), nil
			}
			return nil, fmt.Errorf("find the data in %s (SEEK_DATA): %w", f.Name(), err)
		}
		if start >= size {
			break
		}
		end, err := unix.Seek(int(f.Fd()), start, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("find the data in %s (SEEK_HOLE): %w", f.Name(), err)
		}
		end = min(end, size)
		exts = append(exts, extent{start, end - start})
		pos = end
	}
	return exts, nil
}
