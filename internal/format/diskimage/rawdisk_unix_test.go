//go:build unix

package diskimage

import (
	"io/fs"
	"syscall"
)

// diskUsage returns the space a file takes on the host, holes left out.
func diskUsage(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// statOf returns fi's owner, inode and link count.
func statOf(fi fs.FileInfo) (fileStat, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{}, false
	}
	return fileStat{uid: int(st.Uid), gid: int(st.Gid), dev: uint64(st.Dev), ino: uint64(st.Ino), nlink: uint64(st.Nlink)}, true
}
