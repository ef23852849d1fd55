package state

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Store is the set of clusters on this machine: one directory each under
// Data/clusters, and one lock file each under Data/locks. Every path it
// makes from a cluster's name goes through ClusterDir, which takes only
// names that pass config.CheckName: a name that reached here unchecked
// cannot point outside the clusters directory.
type Store struct {
	dirs Dirs
}

// NewStore returns the store rooted at dirs.
func NewStore(dirs Dirs) *Store {
	return &Store{dirs: dirs}
}

// MarkerFile is in every cluster directory hwk made, holding the cluster's
// name. Remove deletes only a directory that holds it, so that a directory
// hwk did not make is never deleted as a cluster's, whatever its name.
const MarkerFile = ".hwk-cluster"

// legacyRecord is the record older versions of hwk wrote first into every
// cluster directory; one that names the cluster counts as a marker.
const legacyRecord = "cluster.yaml"

// ClustersDir holds one directory per cluster.
func (s *Store) ClustersDir() string { return filepath.Join(s.dirs.Data, "clusters") }

// ClusterDir returns where a cluster's files live (the directory may not
// exist). It refuses a name that fails config.CheckName.
func (s *Store) ClusterDir(name string) (string, error) {
	if err := config.CheckName(name); err != nil {
		return "", err
	}
	return filepath.Join(s.ClustersDir(), name), nil
}

// DriverDir returns driver's directory inside the directory of cluster, for
// drivers, which are handed only names the cluster package has checked. A
// name that fails the check is a bug in hwk, not bad input: it panics
// rather than make a path outside the clusters directory.
func (s *Store) DriverDir(cluster, driver string) string {
	dir, err := s.ClusterDir(cluster)
	if err != nil {
		panic(fmt.Sprintf("hwk bug: driver %s was handed an unchecked cluster name: %v", driver, err))
	}
	return filepath.Join(dir, driver)
}

// Exists reports whether a cluster has a directory.
func (s *Store) Exists(name string) (bool, error) {
	dir, err := s.ClusterDir(name)
	if err != nil {
		return false, err
	}
	_, err = os.Lstat(dir)
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
// SSH keys and passwords), marks it as hwk's, and returns its path. A
// directory already there is taken only when hwk marked it for this
// cluster.
func (s *Store) Create(name string) (string, error) {
	dir, err := s.ClusterDir(name)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(s.ClustersDir(), 0o700); err != nil {
		return "", fmt.Errorf("create state for cluster %s: %w", name, err)
	}
	if err := os.Mkdir(dir, 0o700); errors.Is(err, fs.ErrExist) {
		if err := s.checkOwned(name, dir); err != nil {
			return "", fmt.Errorf("create state for cluster %s: %w", name, err)
		}
	} else if err != nil {
		return "", fmt.Errorf("create state for cluster %s: %w", name, err)
	}
	if err := WriteFileAtomic(filepath.Join(dir, MarkerFile), []byte(name+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("create state for cluster %s: %w", name, err)
	}
	return dir, nil
}

// NotOursError is a directory where a cluster's would be that hwk did not
// make for that cluster; hwk leaves it alone.
type NotOursError struct {
	Dir    string
	Reason string
}

func (e *NotOursError) Error() string {
	return fmt.Sprintf("%s %s, so hwk leaves it alone; if it is yours to delete, inspect and remove it yourself", e.Dir, e.Reason)
}

var errNoMarker = errors.New("no marker")

// checkOwned reports whether dir is the real directory (not a link) of
// cluster name, marked as hwk's. A directory without any marker gives an
// error wrapping errNoMarker.
func (s *Store) checkOwned(name, dir string) error {
	if _, err := s.ExistingDir(name); err != nil {
		return err
	}
	for _, m := range []string{MarkerFile, legacyRecord} {
		b, err := readSmall(filepath.Join(dir, m))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return &NotOursError{Dir: dir, Reason: fmt.Sprintf("has a marker hwk cannot read (%v)", err)}
		}
		if m == MarkerFile && strings.TrimSpace(string(b)) != name {
			return &NotOursError{Dir: dir, Reason: fmt.Sprintf("is marked as cluster %q's, not %q's", config.Shorten(strings.TrimSpace(string(b))), name)}
		}
		if m == legacyRecord && !recordNames(b, name) {
			continue
		}
		return nil
	}
	// A directory holding nothing, or only an unfinished marker, has
	// nothing to lose: it is what an up killed between making the
	// directory and renaming the marker into place leaves.
	if entries, err := os.ReadDir(dir); err == nil && !slices.ContainsFunc(entries, notUnfinishedMarker) {
		return nil
	}
	return fmt.Errorf("%w: %w", &NotOursError{Dir: dir, Reason: "holds no " + MarkerFile + " marker (hwk writes one into every cluster directory it makes)"}, errNoMarker)
}

// notUnfinishedMarker reports whether e is anything except the temporary
// file WriteFileAtomic makes on its way to the marker.
func notUnfinishedMarker(e fs.DirEntry) bool {
	return !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), "."+MarkerFile+".tmp-")
}

// recordNames reports whether a cluster record (YAML) is cluster name's:
// its top-level name field, without a YAML parser for a file that may
// not be a record at all.
func recordNames(b []byte, name string) bool {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "name: "); ok {
			return strings.Trim(strings.TrimSpace(v), `"'`) == name
		}
	}
	return false
}

// readSmall reads a marker, refusing one too large to be hwk's.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 64<<10)
	n, err := f.Read(b)
	if err != nil && n == 0 && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// ExistingDir returns the directory of cluster name, checked to be a real
// directory inside the clusters directory: fs.ErrNotExist when there is
// none, a *NotOursError for a symbolic link or a Windows junction (which
// could lead a read of the cluster's record or kubeconfig, or a delete,
// out of hwk's directory) or a file.
func (s *Store) ExistingDir(name string) (string, error) {
	dir, err := s.ClusterDir(name)
	if err != nil {
		return "", err
	}
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return "", err
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(dir)
		return "", &NotOursError{Dir: dir, Reason: fmt.Sprintf("is a symbolic link (to %s), not a directory hwk made", target)}
	case fi.Mode()&fs.ModeIrregular != 0 && !fi.IsDir():
		// Windows: a junction (any user can make one, mklink /J), or
		// another name-surrogate reparse point. Since Go 1.23 os.Lstat
		// reports them neither as directories nor as symlinks but as
		// irregular (os/types_windows.go, fileStat.mode).
		target, _ := os.Readlink(dir)
		return "", &NotOursError{Dir: dir, Reason: fmt.Sprintf("is a junction or another kind of link (to %s), not a directory hwk made", target)}
	case !fi.IsDir():
		return "", &NotOursError{Dir: dir, Reason: "is a file, not a directory hwk made"}
	}
	return dir, nil
}

// CheckOwned reports, before anything is deleted, whether Remove would take
// cluster name's directory: nil when it is hwk's for that cluster or
// there is none, a *NotOursError when something else is there.
func (s *Store) CheckOwned(name string) error {
	dir, err := s.ClusterDir(name)
	if err != nil {
		return err
	}
	if err := s.checkOwned(name, dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Remove deletes a cluster's directory and everything in it; a cluster
// that has none is not an error. It deletes only the real directory of
// that cluster, marked as hwk's: a symbolic link or junction, a file, or
// a directory without the marker is refused with a *NotOursError and
// left as it is.
func (s *Store) Remove(name string) error {
	dir, err := s.ClusterDir(name)
	if err != nil {
		return err
	}
	if err := s.checkOwned(name, dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("remove state of cluster %s: %w", name, err)
	}
	// Defence in depth: the checked name keeps dir a child of the clusters
	// directory, never that directory or the data directory itself.
	if filepath.Dir(dir) != s.ClustersDir() {
		return fmt.Errorf("remove state of cluster %s: %s is not inside %s", name, dir, s.ClustersDir())
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove state of cluster %s: %w", name, err)
	}
	return nil
}

// List names the clusters that have a directory, sorted. Entries whose
// names are not cluster names (made by hand, or by something else) are
// not clusters.
func (s *Store) List() ([]string, error) {
	entries, err := os.ReadDir(s.ClustersDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && config.CheckName(e.Name()) == nil {
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
	if err := config.CheckName(name); err != nil {
		return nil, err
	}
	return AcquireLock(filepath.Join(s.dirs.Data, "locks", name+".lock"), fmt.Sprintf("cluster %q", name))
}
