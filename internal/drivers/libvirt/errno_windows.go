package libvirt

import (
	"errors"

	winsys "golang.org/x/sys/windows"
)

// refusedOnHost and deniedOnHost: Windows' AF_UNIX sockets (Windows 10
// 1803 and later) fail a connect with Winsock's errors where Linux says
// ECONNREFUSED and EACCES: WSAECONNREFUSED (10061) for a socket file
// nobody listens on, WSAEACCES (10013) for one the user may not write.
// syscall.Errno.Is matches them to neither syscall.ECONNREFUSED nor
// fs.ErrPermission (Go's syscall/syscall_windows.go). See
// https://learn.microsoft.com/windows/win32/winsock/windows-sockets-error-codes-2
// and https://devblogs.microsoft.com/commandline/af_unix-comes-to-windows/.
func refusedOnHost(err error) bool { return errors.Is(err, winsys.WSAECONNREFUSED) }

func deniedOnHost(err error) bool { return errors.Is(err, winsys.WSAEACCES) }
