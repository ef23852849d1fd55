//go:build !linux && !windows && !darwin

package hostmem

import (
	"errors"
	"runtime"
)

func read() (uint64, uint64, error) {
	return 0, 0, errors.New("hwk cannot read the memory of a " + runtime.GOOS + " host")
}
