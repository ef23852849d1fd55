//go:build !windows

package diskimage

import "os"

// makeSparse does nothing: on the file systems of Linux and macOS (ext4,
// XFS, btrfs, APFS) a file is sparse wherever it was never written.
func makeSparse(*os.File) error { return nil }
