package state

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// TestStoreRefusesUncheckedNames checks that every way into the store
// refuses a name that fails the one rule, before any path is made from it.
func TestStoreRefusesUncheckedNames(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	s := NewStore(Dirs{Data: data})
	victim := filepath.Join(root, "victim")
	if err := os.MkdirAll(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", ".", "..", "../victim", "../../victim", victim, "a/b", `a\b`, "A", "-rf", strings.Repeat("a", 33)} {
		var ne *config.NameError
		if _, err := s.ClusterDir(name); !errors.As(err, &ne) {
			t.Errorf("ClusterDir(%q) = %v; want a *config.NameError", name, err)
		}
		if _, err := s.Create(name); !errors.As(err, &ne) {
			t.Errorf("Create(%q) = %v", name, err)
		}
		if err := s.Remove(name); !errors.As(err, &ne) {
			t.Errorf("Remove(%q) = %v", name, err)
		}
		if _, err := s.Exists(name); !errors.As(err, &ne) {
			t.Errorf("Exists(%q) = %v", name, err)
		}
		if _, err := s.Lock(name); !errors.As(err, &ne) {
			t.Errorf("Lock(%q) = %v", name, err)
		}
		if err := s.ReleaseSubnet(name); !errors.As(err, &ne) {
			t.Errorf("ReleaseSubnet(%q) = %v", name, err)
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("victim directory: %v", err)
	}
	if _, err := os.Stat(data); err == nil {
		t.Errorf("refused names made %s", data)
	}
	defer func() {
		if recover() == nil {
			t.Error("DriverDir took an unchecked name")
		}
	}()
	s.DriverDir("../victim", "libvirt")
}

// TestRemoveOnlyWhatIsMarked checks that Remove deletes only a real
// directory that hwk marked for that cluster.
func TestRemoveOnlyWhatIsMarked(t *testing.T) {
	root := t.TempDir()
	s := NewStore(Dirs{Data: filepath.Join(root, "data")})
	clusters := s.ClustersDir()
	for _, d := range []string{clusters, filepath.Join(clusters, "bare"), filepath.Join(clusters, "other"), filepath.Join(clusters, "legacy")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, data string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(clusters, "bare", "data"), "x")
	write(filepath.Join(clusters, "other", MarkerFile), "someone-else\n")
	write(filepath.Join(clusters, "legacy", "cluster.yaml"), "apiVersion: hwk.dev/v1alpha1\nkind: Cluster\nname: legacy\n")
	write(filepath.Join(clusters, "file"), "x")

	for name, want := range map[string]string{
		"bare":  "holds no .hwk-cluster marker",
		"other": `is marked as cluster "someone-else"'s`,
		"file":  "is a file",
	} {
		assertNotOurs(t, s, name, want)
	}

	// An empty directory (an up killed before its marker) holds nothing
	// to lose.
	if err := os.Mkdir(filepath.Join(clusters, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("empty"); err != nil {
		t.Errorf("Remove(empty): %v", err)
	}
	// Nor does one killed between writing the marker's temporary file and
	// renaming it (seen in CI: TestKilledUp/network).
	if err := os.Mkdir(filepath.Join(clusters, "halfmarked"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(clusters, "halfmarked", "."+MarkerFile+".tmp-123"), "")
	if err := s.Remove("halfmarked"); err != nil {
		t.Errorf("Remove(halfmarked): %v", err)
	}
	// ... but a directory named like one is not a temporary file.
	if err := os.MkdirAll(filepath.Join(clusters, "tmpdir", "."+MarkerFile+".tmp-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("tmpdir"); err == nil {
		t.Error("Remove(tmpdir) deleted a directory holding a directory")
	}
	// A directory older hwk made, with only its record, is still hwk's.
	if err := s.Remove("legacy"); err != nil {
		t.Errorf("Remove(legacy): %v", err)
	}
	dir, err := s.Create("mine")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, MarkerFile)); err != nil || string(b) != "mine\n" {
		t.Errorf("marker = %q, %v", b, err)
	}
	if _, err := s.Create("mine"); err != nil {
		t.Errorf("Create again of a marked directory: %v", err)
	}
	if err := s.Remove("mine"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(clusters, "legacy"), filepath.Join(clusters, "empty"), filepath.Join(clusters, "halfmarked")} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there: %v", p, err)
		}
	}
	if _, err := os.Stat(clusters); err != nil {
		t.Errorf("the clusters directory itself went: %v", err)
	}
}

// assertNotOurs checks that every way into the store refuses cluster
// name's directory with a *NotOursError saying want, and leaves it as it is.
func assertNotOurs(t *testing.T, s *Store, name, want string) {
	t.Helper()
	err := s.Remove(name)
	var no *NotOursError
	if !errors.As(err, &no) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "hwk leaves it alone") {
		t.Errorf("Remove(%s) = %v; want a *NotOursError saying %q", name, err, want)
	}
	if err := s.CheckOwned(name); err == nil {
		t.Errorf("CheckOwned(%s) = nil", name)
	}
	if _, err := os.Lstat(filepath.Join(s.ClustersDir(), name)); err != nil {
		t.Errorf("%s was touched: %v", name, err)
	}
	if _, err := s.Create(name); err == nil {
		t.Errorf("Create(%s) took a directory hwk did not mark for it", name)
	}
}

// TestRemoveRefusesLinks checks that the store never follows a link out of
// the clusters directory, even to a directory marked for that cluster: not a
// symbolic link, nor on Windows a junction, which any user can make
// (symbolic links need Developer Mode or an administrator there).
func TestRemoveRefusesLinks(t *testing.T) {
	links := map[string]func(target, link string) error{"symlink": os.Symlink}
	if runtime.GOOS == "windows" {
		links["junction"] = func(target, link string) error {
			out, err := exec.Command("cmd", "/c", "mklink", "/J", link, target).CombinedOutput()
			if err != nil {
				return fmt.Errorf("mklink /J: %v: %s", err, out)
			}
			return nil
		}
	}
	for kind, mklink := range links {
		t.Run(kind, func(t *testing.T) {
			root := t.TempDir()
			s := NewStore(Dirs{Data: filepath.Join(root, "data")})
			outside := filepath.Join(root, "outside")
			for _, d := range []string{s.ClustersDir(), outside} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			// Even a target marked for the cluster is not followed.
			if err := os.WriteFile(filepath.Join(outside, MarkerFile), []byte("link\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(s.ClustersDir(), "link")
			if err := mklink(outside, link); err != nil {
				if runtime.GOOS != "windows" || kind != "symlink" {
					t.Fatal(err)
				}
				t.Skipf("Windows makes symlinks only with Developer Mode or as an administrator: %v", err)
			}
			if _, err := os.Lstat(link); err != nil {
				t.Fatalf("the %s was made, yet is not there: %v", kind, err)
			}
			want := map[string]string{"symlink": "is a symbolic link", "junction": "is a junction"}[kind]
			assertNotOurs(t, s, "link", want)
			var no *NotOursError
			if _, err := s.ExistingDir("link"); !errors.As(err, &no) || !strings.Contains(err.Error(), want) {
				t.Errorf("ExistingDir followed a %s out of the clusters directory: %v", kind, err)
			}
			if _, err := os.Stat(filepath.Join(outside, MarkerFile)); err != nil {
				t.Errorf("the link's target lost its files: %v", err)
			}
		})
	}
}
