//go:build !windows

package libvirt

// refusedOnHost reports whether an error is the host's own form of a
// refused connect beside syscall's (errno_windows.go); here there is none.
func refusedOnHost(error) bool { return false }

// deniedOnHost reports whether an error is the host's own form of a
// forbidden connect beside syscall's; here there is none.
func deniedOnHost(error) bool { return false }
