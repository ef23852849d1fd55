package hyperv

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/testing/hypervtest"
)

// TestFakeProgram checks that the driver's real session starts the fake
// powershell.exe on PATH, that a host with one hwk VM lists as that VM
// (the reply is the object, not an array), and that a script no rule
// expects comes back as an error record the fake keeps for the test.
func TestFakeProgram(t *testing.T) {
	ps := hypervtest.New(t, "one-vm.txt")
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

// TestFakeProgramStderrAndCrash checks that what PowerShell writes to its
// stderr reaches the session's log, and that a PowerShell that dies in the
// middle of a reply fails that script only, with the end of its stderr:
// the next one starts a new process.
func TestFakeProgramStderrAndCrash(t *testing.T) {
	ps := hypervtest.New(t, "crash.txt")
	var log syncBuffer
	s := NewSession(&log)
	defer s.Close()
	d := New(Options{Runner: s})
	ctx := context.Background()
	if ms, err := d.List(ctx, "demo"); err != nil || len(ms) != 0 {
		t.Errorf("list: %+v %v", ms, err)
	}
	if _, err := d.Inspect(ctx, testRef("demo-cp")); err == nil || !strings.Contains(err.Error(), "PowerShell exited in the middle of a reply") ||
		!strings.Contains(err.Error(), "the end of its stderr: ") || !strings.HasSuffix(err.Error(), "Process is terminated due to StackOverflowException.") {
		t.Errorf("inspect as PowerShell dies: %v", err)
	}
	m, err := d.Inspect(ctx, testRef("demo-cp"))
	if err != nil || m.State != drivers.StateRunning {
		t.Errorf("inspect after: %+v %v", m, err)
	}
	ps.Check(t)
	if starts := ps.Starts(); len(starts) != 2 {
		t.Errorf("%d PowerShell starts, want 2 (one before the crash, one after)", len(starts))
	}
	s.Close()
	if !strings.Contains(log.String(), "<AV>Preparing modules for first use.</AV>") {
		t.Errorf("the session's log lacks PowerShell's stderr: %q", log.String())
	}
}

// TestFakeProgramSilent checks that the driver's real session, started on
// a powershell.exe that never answers (as Wine's stub), gives up after the
// session's start limit with a reason, and kills the process it started.
func TestFakeProgramSilent(t *testing.T) {
	ps := hypervtest.NewSilent(t)
	s := NewSession(io.Discard)
	s.startTimeout = time.Second
	defer s.Close()
	d := New(Options{Runner: s})
	began := time.Now()
	_, err := d.Preflight(context.Background())
	if err == nil || !strings.Contains(err.Error(), "powershell.exe started but did not answer in 1s") {
		t.Errorf("preflight: %v", err)
	}
	if took := time.Since(began); took > 15*time.Second {
		t.Errorf("preflight took %s", took)
	}
	if starts := ps.Starts(); len(starts) != 1 {
		t.Errorf("starts: %q", starts)
	}
}

// syncBuffer is a buffer the session's stderr copier and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSessionRefusesWSL checks that Linux hwk in a WSL distribution, whose
// PATH reaches Windows' powershell.exe, does not start it (the driver
// would hand Windows Linux paths): the driver is unavailable, with the
// reason.
func TestSessionRefusesWSL(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("fakes the Linux hwk inside WSL, which hwk.exe on Windows is not: there the session starts powershell.exe (TestFakeProgram)")
	}
	ps := hypervtest.New(t, "one-vm.txt")
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
