package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Lock is an exclusive lock held by this process. The operating system
// drops it when the process dies, so a crashed command never leaves a
// cluster locked.
type Lock struct {
	// Why hand-written rather than github.com/gofrs/flock: the holder
	// writes its pid and command line into the lock file for whoever
	// loses the race to read, and on Windows a LockFileEx range also
	// blocks other processes' reads of those bytes. gofrs/flock locks the
	// file's first byte (v0.13: LockFileEx(..., 0, 1, 0,
	// &windows.Overlapped{})), where the pid is; hwk locks a byte 4 GiB in
	// (lock_windows.go). flock also offers no way to find that a holder
	// removed the file under a waiter (current, Remove).
	f    *os.File
	path string
}

// LockedError is the error of a lock another process holds, naming it.
type LockedError struct {
	Name string // what the lock guards, e.g. `cluster "hwk"`
	Path string
	// PID and Command identify the holder; PID is 0 when the holder had
	// not yet written itself into the lock file.
	PID     int
	Command string
}

func (e *LockedError) Error() string {
	holder := "another hwk command"
	if e.PID > 0 {
		holder = fmt.Sprintf("another hwk command (pid %d: %s)", e.PID, e.Command)
	}
	return fmt.Sprintf("%s is in use by %s; wait for it to finish, or stop that process and retry", e.Name, holder)
}

// errWouldBlock is what tryLock returns when another process holds the lock.
var errWouldBlock = errors.New("lock held")

// AcquireLock takes the lock at path without waiting. If another process
// holds it, the error is a *LockedError naming that process. name is
// what the lock guards, for that error.
func AcquireLock(path, name string) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	var f *os.File
	for attempt := 0; ; attempt++ {
		var err error
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		if err := tryLock(f); err != nil {
			f.Close()
			if errors.Is(err, errWouldBlock) {
				pid, cmd := readHolder(path)
				return nil, &LockedError{Name: name, Path: path, PID: pid, Command: cmd}
			}
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		// The holder we waited behind may have removed the file (Remove)
		// between our open and our lock: then we hold a lock on a file
		// nobody else can see, and must lock the one at path instead.
		if current(f, path) || attempt == 10 {
			break
		}
		unlock(f)
		f.Close()
	}
	// Say who we are, for whoever loses the race. The lock is already ours,
	// so nobody else writes here.
	if err := writeHolder(f); err != nil {
		unlock(f)
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return &Lock{f: f, path: path}, nil
}

// current reports whether f is still the file at path.
func current(f *os.File, path string) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(held, now)
}

// Release drops the lock. The file stays: removing it would let a process
// that opened it a moment earlier lock a file nobody else can see.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Truncate(0)
	err := unlock(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// Remove drops the lock and deletes its file, for when what it guarded is
// gone (the cluster was deleted, or up made nothing), so that no lock file
// outlives its cluster. A process that opened the file a moment earlier
// sees, once it holds the lock, that the file is no longer at its path,
// and takes the lock again on a new one.
func (l *Lock) Remove() error {
	if l == nil || l.f == nil {
		return nil
	}
	return removeHeld(l)
}

func writeHolder(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(fmt.Appendf(nil, "%d\n%s\n", os.Getpid(), commandLine()), 0); err != nil {
		return err
	}
	return f.Sync()
}

// readHolder reads the holder's pid and command line. The holder writes
// them right after taking the lock, so an empty file is retried briefly.
func readHolder(path string) (int, string) {
	for range 10 {
		data, err := os.ReadFile(path)
		if err == nil {
			pidText, cmd, _ := strings.Cut(string(data), "\n")
			if pid, err := strconv.Atoi(pidText); err == nil {
				return pid, strings.TrimSpace(cmd)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, ""
}

func commandLine() string {
	if len(os.Args) == 0 {
		return "hwk"
	}
	args := append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...)
	return strings.Join(args, " ")
}
