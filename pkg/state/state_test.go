package state

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

const helperEnv = "HWK_TEST_LOCK_HELPER"

// TestMain lets the test binary play a second hwk process: with
// HWK_TEST_LOCK_HELPER=DATA it takes the lock of cluster "demo" in store
// DATA, says "locked", and holds it until its stdin closes.
func TestMain(m *testing.M) {
	if data := os.Getenv(helperEnv); data != "" {
		s := NewStore(Dirs{Data: data})
		l, err := s.Lock("demo")
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		fmt.Println("locked")
		bufio.NewReader(os.Stdin).ReadString('\n')
		l.Release()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestLockAcrossProcesses(t *testing.T) {
	data := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), helperEnv+"="+data)
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("helper said %q", line)
	}

	s := NewStore(Dirs{Data: data})
	_, err = s.Lock("demo")
	var locked *LockedError
	if !errors.As(err, &locked) {
		t.Fatalf("second process got %v, want a LockedError", err)
	}
	if locked.PID != child.Process.Pid {
		t.Errorf("holder pid %d, want %d", locked.PID, child.Process.Pid)
	}
	msg := err.Error()
	for _, want := range []string{`cluster "demo" is in use`, fmt.Sprintf("pid %d", child.Process.Pid), "wait for it to finish"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}

	// Another cluster's lock is independent.
	other, err := s.Lock("other")
	if err != nil {
		t.Fatalf("lock of another cluster: %v", err)
	}
	other.Release()

	// Once the holder lets go, the lock can be taken.
	stdin.Close()
	if err := child.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	l, err := s.Lock("demo")
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
}

func TestLockDroppedWhenHolderDies(t *testing.T) {
	data := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), helperEnv+"="+data)
	stdout, _ := child.StdoutPipe()
	child.StdinPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(stdout).ReadString('\n')
	child.Process.Kill()
	child.Wait()

	l, err := NewStore(Dirs{Data: data}).Lock("demo")
	if err != nil {
		t.Fatalf("a dead holder still blocks the lock: %v", err)
	}
	l.Release()
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != "new" {
		t.Errorf("content %q", got)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}

	// A symlinked file is replaced behind the link; the link stays.
	real := filepath.Join(dir, "real")
	os.WriteFile(real, []byte("x"), 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		if runtime.GOOS != "windows" {
			t.Fatal(err)
		}
		t.Skipf("Windows makes symlinks only with Developer Mode or as an administrator: %v", err)
	}
	if err := WriteFileAtomic(link, []byte("y"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the symlink was replaced by a file")
	}
	if got, _ := os.ReadFile(real); string(got) != "y" {
		t.Errorf("link target holds %q", got)
	}

	// A directory that does not exist is an error, not a panic or a stray file.
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Error("write into a missing directory succeeded")
	}
}

func TestStore(t *testing.T) {
	s := NewStore(Dirs{Data: t.TempDir()})
	if names, err := s.List(); err != nil || len(names) != 0 {
		t.Fatalf("empty store lists %v, %v", names, err)
	}
	for _, n := range []string{"b", "a"} {
		dir, err := s.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
			t.Errorf("cluster dir mode %v, want 0700", fi.Mode().Perm())
		}
	}
	l, err := s.Lock("a") // lock files must not show up as clusters
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	names, err := s.List()
	if err != nil || strings.Join(names, ",") != "a,b" {
		t.Fatalf("List = %v, %v", names, err)
	}
	if err := s.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Exists("a"); ok {
		t.Error("removed cluster still exists")
	}
	if err := s.Remove("never-was"); err != nil {
		t.Errorf("removing a missing cluster: %v", err)
	}
}

func TestDefaultDirs(t *testing.T) {
	t.Setenv(HomeEnv, "/tmp/hwk-home")
	d := DefaultDirs()
	if d.Data != "/tmp/hwk-home/data" || d.Cache != "/tmp/hwk-home/cache" || d.Config != "/tmp/hwk-home/config" {
		t.Errorf("HWK_HOME not honoured: %+v", d)
	}
	t.Setenv(HomeEnv, "")
	t.Setenv("XDG_DATA_HOME", "/x/data")
	t.Setenv("XDG_CACHE_HOME", "/x/cache")
	t.Setenv("XDG_CONFIG_HOME", "/x/config")
	d = DefaultDirs()
	if d.Data != "/x/data/hwk" || d.Cache != "/x/cache/hwk" || d.Config != "/x/config/hwk" {
		t.Errorf("XDG variables not honoured: %+v", d)
	}
}

// TestLockRemove: Remove deletes the lock file, and a process that opened
// the file before it was removed does not take the lock on the dead file.
func TestLockRemove(t *testing.T) {
	data := t.TempDir()
	s := NewStore(Dirs{Data: data})
	l, err := s.Lock("demo")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(data, "locks", "demo.lock")
	early, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the lock file is still there after Remove (%v)", err)
	}
	if err := tryLock(early); err != nil {
		t.Fatalf("lock the removed file: %v", err)
	}
	if current(early, path) {
		t.Error("a lock on the removed file counts as the current lock")
	}
	unlock(early)
	again, err := s.Lock("demo")
	if err != nil {
		t.Fatalf("lock after Remove: %v", err)
	}
	if err := again.Remove(); err != nil {
		t.Fatal(err)
	}
}

func TestSubnetReservations(t *testing.T) {
	s := NewStore(Dirs{Data: t.TempDir()})
	l, err := s.LockSubnets(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LockSubnets(200 * time.Millisecond); err == nil {
		t.Fatal("a second holder got the subnet lock")
	}
	a, b := netip.MustParsePrefix("172.31.250.0/24"), netip.MustParsePrefix("172.31.251.0/24")
	if err := s.ReserveSubnet("a", a); err != nil {
		t.Fatal(err)
	}
	if err := s.ReserveSubnet("b", b); err != nil {
		t.Fatal(err)
	}
	l.Release()
	if err := s.ReleaseSubnet("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseSubnet("a"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Subnets()
	if err != nil || len(got) != 1 || got["b"] != b {
		t.Errorf("Subnets = %v, %v; want only b's", got, err)
	}
	if names, _ := s.List(); len(names) != 0 {
		t.Errorf("reservations show up as clusters: %v", names)
	}
	if err := s.ReleaseSubnet("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.subnetsDir()); !os.IsNotExist(err) {
		t.Errorf("the last release left %s (%v)", s.subnetsDir(), err)
	}
}

// A leftover whose command still runs (its lock held) is kept; one whose
// command died (lock free) is removed, and so is its lock file.
func TestSweepLeftovers(t *testing.T) {
	dir := t.TempDir()
	live, err := HoldLeftover(dir, "hwk-build-live")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Remove()
	dead, err := HoldLeftover(dir, "hwk-build-dead")
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Release(); err != nil { // as when its process dies
		t.Fatal(err)
	}
	var removed []string
	if err := SweepLeftovers(dir, func(name string) error { removed = append(removed, name); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != "hwk-build-dead" {
		t.Errorf("removed %v, want only the dead build's", removed)
	}
	if _, err := os.Stat(filepath.Join(dir, "hwk-build-dead.lock")); !os.IsNotExist(err) {
		t.Errorf("the dead build's lock file: %v", err)
	}
	// A removal that fails leaves the lock for the next sweep.
	if err := live.Release(); err != nil {
		t.Fatal(err)
	}
	err = SweepLeftovers(dir, func(string) error { return errors.New("libvirt is down") })
	if err == nil || !strings.Contains(err.Error(), "remove hwk-build-live, left by a build that stopped: libvirt is down") {
		t.Errorf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "hwk-build-live.lock")); err != nil {
		t.Errorf("after a failed removal the lock is gone: %v", err)
	}
}
