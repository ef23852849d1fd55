//go:build !windows

package libvirt

// refusedOnHost and deniedOnHost are the host's own forms of a refused
// and a forbidden connect beside syscall's (errno_windows.go); elsewhere
// syscall's are the only ones.
func refusedOnHost(error) bool { return false }

func deniedOnHost(error) bool { return false }
