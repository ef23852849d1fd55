//go:build windows

package hyperv

import (
	"io"
	"os"
)

// openNamedPipe opens a named pipe (\\.\pipe\NAME) for reading.
func openNamedPipe(pipe string) (io.ReadCloser, error) { return os.OpenFile(pipe, os.O_RDONLY, 0) }
