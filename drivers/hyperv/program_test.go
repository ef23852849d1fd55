package hyperv

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/drivers/hyperv/hypervtest"
)

// TestFakeProgram: the driver's real session starts the fake
// powershell.exe on PATH, a host with one hwk VM lists as that VM (the
// reply is the object, not an array), and a script no rule expects comes
// back as an error record and stays on the fake's record for the test to
// fail on.
func TestFakeProgram(t *testing.T) {
	ps := hypervtest.New(t, "one-vm.json")
	s := NewSession(io.Discard)
	defer s.Close()
	d := New(Options{Runner: s})
	ctx := context.Background()
	ms, err := d.List(ctx, "demo")
	if err != nil || len(ms) != 1 || ms[0].Name != "demo-cp" || ms[0].State != drivers.StateRunning {
		t.Errorf("list: %+v %v", ms, err)
	}
	err = d.Stop(ctx, testRef("demo-cp"))
	var pe *PSError
	if !errors.As(err, &pe) || pe.Category != "NotImplemented" || !strings.Contains(err.Error(), "did not expect this script") {
		t.Errorf("an unexpected script: %v", err)
	}
	if u := ps.Unexpected(); !strings.Contains(u, "a script no rule expects") || !strings.Contains(u, "-AsJob") {
		t.Errorf("the fake's record of what it did not expect: %q", u)
	}
	if starts := ps.Starts(); len(starts) != 1 || starts[0] != "-NoLogo -NoProfile -NonInteractive -ExecutionPolicy Bypass -Command -" {
		t.Errorf("starts: %q", starts)
	}
}

// TestSessionRefusesWSL: Linux hwk in a WSL distribution, whose PATH
// reaches Windows' powershell.exe, does not start it (the driver would
// hand Windows Linux paths): the driver is unavailable, with the reason.
func TestSessionRefusesWSL(t *testing.T) {
	ps := hypervtest.New(t, "one-vm.json")
	t.Setenv("WSL_DISTRO_NAME", "Ubuntu")
	s := NewSession(io.Discard)
	defer s.Close()
	_, err := New(Options{Runner: s}).List(context.Background(), "demo")
	var ue *drivers.UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "this is the Linux hwk in a WSL distribution") {
		t.Errorf("list under WSL: %v", err)
	}
	if starts := ps.Starts(); len(starts) != 0 {
		t.Errorf("PowerShell started under WSL: %q", starts)
	}
}
