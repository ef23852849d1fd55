package nodeimage

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRemoveWorkUnmountsFirst: a work directory with what a killed
// debootstrap leaves mounted in it (proc, and a bind mount of a directory
// outside, as it binds the host's /dev/shm in a container) is removed
// without a file of the bound directory lost.
func TestRemoveWorkUnmountsFirst(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	host := t.TempDir()
	keep := filepath.Join(host, "keep")
	if err := os.WriteFile(keep, []byte("the host's"), 0o644); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "debootstrap- with space")
	shm := filepath.Join(work, "root", "dev", "shm")
	proc := filepath.Join(work, "root", "proc")
	for _, d := range []string{shm, proc} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Whatever happens below, nothing stays mounted (a failing
	// removeWork must not leave the test's mounts behind).
	t.Cleanup(func() {
		syscall.Unmount(shm, syscall.MNT_DETACH)
		syscall.Unmount(proc, syscall.MNT_DETACH)
	})
	if err := syscall.Mount(host, shm, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v (no mount rights here)", err)
	}
	if err := syscall.Mount("proc", proc, "proc", 0, ""); err != nil {
		t.Skipf("mount proc: %v", err)
	}
	mounts, err := mountsUnder(work)
	if err != nil || len(mounts) != 2 {
		t.Errorf("mountsUnder = %q, %v; want the two mounts", mounts, err)
	}
	if err := removeWork(work); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "the host's" {
		t.Fatalf("the bound directory's file: %q, %v", b, err)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", work, err)
	}
	if left, _ := mountsUnder(filepath.Dir(work)); len(left) > 0 {
		t.Errorf("still mounted: %s", strings.Join(left, ", "))
	}
}

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:           "/a/b",
		`/a\040b/c`:      "/a b/c",
		`/tab\011x\134y`: "/tab\tx\\y",
		`/trailing\04`:   `/trailing\04`,
		`/not\999octal`:  `/not\999octal`,
		`/nl\012`:        "/nl\n",
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}
