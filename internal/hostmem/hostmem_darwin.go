package hostmem

import "golang.org/x/sys/unix"

// read returns the total for both figures: macOS does not say how much is
// free in a way that means available (it keeps files cached).
func read() (uint64, uint64, error) {
	total, err := unix.SysctlUint64("hw.memsize")
	return total, total, err
}
