package state

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockOffsetHigh places the locked byte 4 GiB into the file, past anything
// written there: a LockFileEx range also blocks reads of those bytes by
// other processes, and the loser must still read the holder's pid.
const lockOffsetHigh = 1

func tryLock(f *os.File) error {
	ol := windows.Overlapped{OffsetHigh: lockOffsetHigh}
	err := windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return errWouldBlock
	}
	return err
}

func unlock(f *os.File) error {
	ol := windows.Overlapped{OffsetHigh: lockOffsetHigh}
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol)
}

// removeHeld releases the lock, then deletes the file. Windows refuses to
// delete a file another process has open (Go opens files without
// FILE_SHARE_DELETE), so a process that opened it in between keeps it:
// that is no error, the file is then that process's to remove.
func removeHeld(l *Lock) error {
	if err := l.Release(); err != nil {
		return err
	}
	if err := os.Remove(l.path); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, windows.ERROR_SHARING_VIOLATION) && !errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		return err
	}
	return nil
}
