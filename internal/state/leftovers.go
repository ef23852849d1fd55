package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// HoldLeftover takes the lock dir/NAME.lock for a throwaway thing named
// name that lives outside hwk's directories while a command runs (a build
// VM, a WSL distribution). The command calls Remove on the lock once the
// thing is gone; if it dies first, the lock is free and the next
// SweepLeftovers of dir removes the thing.
func HoldLeftover(dir, name string) (*Lock, error) {
	return AcquireLock(filepath.Join(dir, name+".lock"), name)
}

// EndLeftover ends what HoldLeftover began, given what removing the thing
// gave: with it gone the lock goes too; otherwise the lock is let go but
// stays, for the next SweepLeftovers, and removeErr is returned.
func EndLeftover(l *Lock, removeErr error) error {
	if removeErr != nil {
		_ = l.Release()
		return removeErr
	}
	return l.Remove()
}

// SweepLeftovers calls remove for each name in dir whose lock nobody
// holds (its command died before removing it), then deletes that lock.
// Things another running command holds are left alone.
func SweepLeftovers(dir string, remove func(name string) error) error {
	// Not filepath.Glob: dir may hold pattern characters ([ in HWK_HOME).
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		l, err := AcquireLock(p, name)
		var held *LockedError
		if errors.As(err, &held) || errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := EndLeftover(l, remove(name)); err != nil {
			errs = append(errs, fmt.Errorf("remove %s, left by a build that stopped: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
