//go:build !unix

package diskimage

import "io/fs"

// diskUsage returns fi's size: the space a file takes is not known here.
func diskUsage(fi fs.FileInfo) int64 { return fi.Size() }

// statOf returns false: the stat is not known here, so tarTree keeps what
// tar.FileInfoHeader gives.
func statOf(fs.FileInfo) (fileStat, bool) { return fileStat{}, false }
