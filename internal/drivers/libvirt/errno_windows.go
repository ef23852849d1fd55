package libvirt

import (
	"errors"

	// Why Winsock's errors: syscall.Errno.Is matches them to neither
	// syscall.ECONNREFUSED nor fs.ErrPermission (Go's
	// syscall/syscall_windows.go). See
	// https://learn.microsoft.com/windows/win32/winsock/windows-sockets-error-codes-2
	// and https://devblogs.microsoft.com/commandline/af_unix-comes-to-windows/.
	winsys "golang.org/x/sys/windows"
)

// refusedOnHost reports whether err is Winsock's WSAECONNREFUSED (10061),
// which Windows' AF_UNIX sockets (Windows 10 1803 and later) return where
// Linux has ECONNREFUSED: a socket file nobody listens on.
func refusedOnHost(err error) bool { return errors.Is(err, winsys.WSAECONNREFUSED) }

// deniedOnHost reports whether err is Winsock's WSAEACCES (10013), returned
// where Linux has EACCES: a socket file the user may not write.
func deniedOnHost(err error) bool { return errors.Is(err, winsys.WSAEACCES) }
