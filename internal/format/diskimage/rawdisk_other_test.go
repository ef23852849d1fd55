//go:build !unix

package diskimage

import "io/fs"

// diskUsage is a file's size where the space it takes is not known here.
func diskUsage(fi fs.FileInfo) int64 { return fi.Size() }

// statOf is not known here: tarTree keeps what tar.FileInfoHeader gives.
func statOf(fs.FileInfo) (fileStat, bool) { return fileStat{}, false }
