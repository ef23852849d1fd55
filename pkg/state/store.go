package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// Store is the set of clusters on this machine: one directory each under
// Data/clusters, and one lock file each under Data/locks.
type Store struct {
	dirs Dirs
}

// NewStore returns the store rooted at dirs.
func NewStore(dirs Dirs) *Store {
	return &Store{dirs: dirs}
}

// ClusterDir is where a cluster's files live. It may not exist.
func (s *Store) ClusterDir(name string) string {
	return filepath.Join(s.dirs.Data, "clusters", name)
}

// Exists reports whether a cluster has a directory.
func (s *Store) Exists(name string) (bool, error) {
	_, err := os.Stat(s.ClusterDir(name))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("look for cluster %s: %w", name, err)
	}
}

// Create makes a cluster's directory, private to this user (it will hold
// SSH keys and passwords), and returns its path.
func (s *Store) Create(name string) (string, error) {
	dir := s.ClusterDir(name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create state for cluster %s: %w", name, err)
	}
	return dir, nil
}

// Remove deletes a cluster's directory and everything in it; a cluster
// that has none is not an error.
func (s *Store) Remove(name string) error {
	if err := os.RemoveAll(s.ClusterDir(name)); err != nil {
		return fmt.Errorf("remove state of cluster %s: %w", name, err)
	}
	return nil
}

// List names the clusters that have a directory, sorted.
func (s *Store) List() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.dirs.Data, "clusters"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Lock takes the cluster's lock, or fails at once with a *LockedError
// naming the process that holds it. Lock files live apart from the
// cluster directory so that deleting a cluster never deletes a held lock.
func (s *Store) Lock(name string) (*Lock, error) {
	return AcquireLock(filepath.Join(s.dirs.Data, "locks", name+".lock"), fmt.Sprintf("cluster %q", name))
}
