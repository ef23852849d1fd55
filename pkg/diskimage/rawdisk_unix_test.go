//go:build unix

package diskimage

import (
	"io/fs"
	"syscall"
)

// diskUsage is the space a file takes on the host, holes left out.
func diskUsage(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}
