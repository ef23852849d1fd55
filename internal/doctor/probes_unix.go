//go:build linux || darwin

package doctor

import (
	"errors"

	"golang.org/x/sys/unix"
)

func statfsFree(path string) (uint64, error) {
	for {
		var st unix.Statfs_t
		err := unix.Statfs(path, &st)
		if err == nil {
			return st.Bavail * uint64(st.Bsize), nil
		}
		// hwk's directories may not exist yet: their file system is
		// their nearest existing parent's.
		parent := parentDir(path)
		if !errors.Is(err, unix.ENOENT) || parent == path {
			return 0, err
		}
		path = parent
	}
}
