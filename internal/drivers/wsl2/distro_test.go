package wsl2

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/testing/wsltest"
)

// TestDistros checks that importing a node's distribution is done once, a
// distribution of the name that hwk did not make is refused, stopping is
// idempotent, and a distribution unregistered by hand is stopped and
// deleted without error, leaving no files.
func TestDistros(t *testing.T) {
	data, tar := t.TempDir(), filepath.Join(t.TempDir(), "rootfs.tar")
	fake := wsltest.New(t, "distro.txt", map[string]string{"DATA": data, "TAR": tar})
	d := distros{r: CLI{}, dir: func(r drivers.Ref) string { return filepath.Join(data, r.Name) }}
	ctx := context.Background()
	cp, w2 := drivers.Ref{Cluster: "demo", Name: "demo-cp"}, drivers.Ref{Cluster: "demo", Name: "demo-w2"}
	for _, r := range []drivers.Ref{cp, w2, cp, w2} {
		if err := d.ensure(ctx, r, tar, marker{}); err != nil {
			t.Fatalf("ensure %s: %v", r.Name, err)
		}
	}
	// Windows has no mode bits (Go shows 0666, or 0444 for a read-only
	// file); there the file is private by the ACL that the user's profile,
	// which holds hwk's directories, passes down.
	if fi, err := os.Stat(filepath.Join(data, "demo-cp", markerFile)); err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600) {
		t.Errorf("marker: %v %v", fi, err)
	}
	var inUse *drivers.NameInUseError
	if err := d.ensure(ctx, drivers.Ref{Cluster: "demo", Name: "other"}, tar, marker{}); !errors.As(err, &inUse) || inUse.Remove != "wsl.exe --unregister hwk-other" {
		t.Errorf("a distribution hwk did not make: %v", err)
	}
	if reg, run, err := d.state(ctx, cp); !reg || !run || err != nil {
		t.Errorf("state before stop: %v %v %v", reg, run, err)
	}
	for range 2 {
		if err := d.stop(ctx, cp); err != nil {
			t.Errorf("stop: %v", err)
		}
	}
	if reg, run, err := d.state(ctx, cp); !reg || run || err != nil {
		t.Errorf("state after stop: %v %v %v", reg, run, err)
	}
	if err := d.stop(ctx, w2); err != nil {
		t.Errorf("stop of a distribution removed by hand: %v", err)
	}
	for _, r := range []drivers.Ref{w2, cp, cp} {
		if err := d.remove(ctx, r); err != nil {
			t.Errorf("remove %s: %v", r.Name, err)
		}
		if _, err := os.Stat(d.dir(r)); !os.IsNotExist(err) {
			t.Errorf("%s's directory is still there: %v", r.Name, err)
		}
	}
	fake.Check(t)
}
