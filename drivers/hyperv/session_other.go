//go:build !windows

package hyperv

import (
	"errors"
	"io"
)

// errNotWindows is every host but Windows: Hyper-V is Windows'.
var errNotWindows = errors.New("Hyper-V runs only on Windows")

func startPowerShell(io.Writer) (process, error) { return nil, errNotWindows }
