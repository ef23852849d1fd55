package state

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Node subnets are reserved when `up` chooses one, before the cluster has
// a record, so that two ups at once never choose the same: one file per
// cluster under Data/subnets, written under a lock that every choice
// holds.

func (s *Store) subnetsDir() string { return filepath.Join(s.dirs.Data, "subnets") }

// LockSubnets takes the host-wide lock under which a subnet is chosen and
// reserved, waiting up to wait for another hwk that holds it.
func (s *Store) LockSubnets(wait time.Duration) (*Lock, error) {
	deadline := time.Now().Add(wait)
	for {
		l, err := AcquireLock(filepath.Join(s.subnetsDir(), ".lock"), "the choice of node subnets")
		var le *LockedError
		if !errors.As(err, &le) || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ReserveSubnet records that cluster name uses p.
func (s *Store) ReserveSubnet(name string, p netip.Prefix) error {
	if err := config.CheckName(name); err != nil {
		return err
	}
	if err := os.MkdirAll(s.subnetsDir(), 0o700); err != nil {
		return fmt.Errorf("reserve subnet %s for cluster %s: %w", p, name, err)
	}
	return WriteFileAtomic(filepath.Join(s.subnetsDir(), name), []byte(p.String()+"\n"), 0o600)
}

// ReleaseSubnet drops cluster name's reservation; none is not an error.
func (s *Store) ReleaseSubnet(name string) error {
	if err := config.CheckName(name); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(s.subnetsDir(), name)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	l, err := s.LockSubnets(30 * time.Second)
	if err != nil {
		return err
	}
	if err := s.DropReservation(name); err != nil {
		l.Release()
		return err
	}
	return s.UnlockSubnets(l)
}

// UnlockSubnets drops the LockSubnets lock; with no reservation left it
// removes the lock file and the directory too, so that a host without
// clusters keeps nothing of hwk's except its caches.
func (s *Store) UnlockSubnets(l *Lock) error {
	if left, err := s.Subnets(); err == nil && len(left) == 0 {
		err := l.Remove()
		os.Remove(s.subnetsDir()) // fails harmlessly if another hwk just made a file there
		return err
	}
	return l.Release()
}

// DropReservation removes cluster name's reservation; the caller holds the
// LockSubnets lock.
func (s *Store) DropReservation(name string) error {
	if err := config.CheckName(name); err != nil {
		return err
	}
	err := os.Remove(filepath.Join(s.subnetsDir(), name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("release the subnet of cluster %s: %w", name, err)
	}
	return nil
}

// Subnets returns the reserved subnets by cluster.
func (s *Store) Subnets() (map[string]netip.Prefix, error) {
	entries, err := os.ReadDir(s.subnetsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read reserved subnets: %w", err)
	}
	out := map[string]netip.Prefix{}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.subnetsDir(), e.Name()))
		if err != nil {
			continue
		}
		if p, err := netip.ParsePrefix(strings.TrimSpace(string(b))); err == nil {
			out[e.Name()] = p
		}
	}
	return out, nil
}
