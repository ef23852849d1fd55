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
// DATA, prints "locked", and holds it until its stdin closes.
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
	// Windows: Chmod sets only the read-only attribute; the file has its
	// directory's inherited ACL (WriteFileAtomic), so there is no mode to check.
	if fi, _ := os.Stat(path); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}

	// A directory that does not exist is an error, not a panic or a stray file.
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("a failed write left %v", entries)
	}
}

// TestWriteFileAtomicThroughSymlink checks that a symlinked file is replaced
// behind the link; the link stays.
func TestWriteFileAtomicThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.WriteFile(real, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		if runtime.GOOS != "windows" {
			t.Fatal(err)
		}
		t.Skipf("Windows makes symlinks only with Developer Mode or as an administrator: %v", err)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Fatalf("os.Symlink succeeded but made no link: %v", err)
	}
	if err := WriteFileAtomic(link, []byte("y"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced by a file (%v)", err)
	}
	if got, _ := os.ReadFile(real); string(got) != "y" {
		t.Errorf("link target holds %q", got)
	}
}

// TestWriteFileAtomicWhileOpen checks that a file another process has open
// is replaced once it is closed: on Windows the rename over it fails until
// then, and WriteFileAtomic waits.
func TestWriteFileAtomicWhileOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		time.Sleep(300 * time.Millisecond)
		reader.Close()
		close(closed)
	}()
	if err := WriteFileAtomic(path, []byte("new"), 0o600); err != nil {
		t.Fatalf("replace a file that is open for a moment: %v", err)
	}
	<-closed
	if got, _ := os.ReadFile(path); string(got) != "new" {
		t.Errorf("content %q, want new", got)
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
		// Windows: Mkdir's mode is not applied; the directory has its
		// parent's inherited ACL, so there is no mode to check.
		if fi, err := os.Stat(dir); err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o700) {
			t.Errorf("cluster dir: %v, %v; want mode 0700", fi, err)
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
	// Absolute paths of this OS: adrg/xdg ignores an XDG variable that is
	// not absolute, and /x is not on Windows (no drive).
	root := t.TempDir()
	home := filepath.Join(root, "hwk-home")
	t.Setenv(HomeEnv, home)
	d := DefaultDirs()
	if d.Data != filepath.Join(home, "data") || d.Cache != filepath.Join(home, "cache") || d.Config != filepath.Join(home, "config") {
		t.Errorf("HWK_HOME not honoured: %+v", d)
	}
	t.Setenv(HomeEnv, "")
	x := filepath.Join(root, "x")
	t.Setenv("XDG_DATA_HOME", filepath.Join(x, "data"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(x, "cache"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(x, "config"))
	d = DefaultDirs()
	if d.Data != filepath.Join(x, "data", "hwk") || d.Cache != filepath.Join(x, "cache", "hwk") || d.Config != filepath.Join(x, "config", "hwk") {
		t.Errorf("XDG variables not honoured: %+v", d)
	}
}

// TestLockRemove checks that Remove deletes the lock file, and a process
// that opened the file before it was removed does not take the lock on the
// dead file. On Windows the file cannot be deleted while that process has it
// open, so it stays, and that process's lock on it is the current one.
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
	if runtime.GOOS == "windows" {
		// DeleteFile fails with a sharing violation while early is open
		// (Go opens files without FILE_SHARE_DELETE: syscall.Open).
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("Remove deleted a lock file another process has open: %v", err)
		}
		if err := tryLock(early); err != nil {
			t.Fatalf("lock the file Remove left: %v", err)
		}
		if !current(early, path) {
			t.Error("a lock on the file at the lock's path does not count as the current lock")
		}
	} else {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("the lock file is still there after Remove (%v)", err)
		}
		if err := tryLock(early); err != nil {
			t.Fatalf("lock the removed file: %v", err)
		}
		if current(early, path) {
			t.Error("a lock on the removed file counts as the current lock")
		}
	}
	unlock(early)
	early.Close()
	again, err := s.Lock("demo")
	if err != nil {
		t.Fatalf("lock after Remove: %v", err)
	}
	if err := again.Remove(); err != nil {
		t.Fatal(err)
	}
	// With no other process holding the file open, it goes on every OS.
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the lock file is still there after the last Remove (%v)", err)
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

// TestSweepLeftovers checks that a leftover whose command still runs (its
// lock held) is kept; one whose command died (lock free) is removed, and so
// is its lock file.
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
