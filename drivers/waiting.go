package drivers

import (
	"context"
	"fmt"
	"time"

	"github.com/hwk-dev/hwk/internal/ui"
)

// PreflightTimeout bounds one driver's preflight: a driver whose host tool
// does not answer (a PowerShell that never replies, a hung wsl.exe) is
// reported unusable, naming what it was waiting for, instead of holding up
// every command that probes the host.
const PreflightTimeout = time.Minute // Why a minute: the Hyper-V driver's PowerShell start (hyperv.StartTimeout) and CIM checks take seconds on a laptop.

// preflightLimit is PreflightTimeout, shortened by tests.
var preflightLimit = PreflightTimeout

// Waiting records what a preflight is waiting for now ("powershell.exe
// to answer"), for the progress notes and the timeout's error. Drivers
// call it before each step that may block; it does nothing on a context
// that did not come from Preflight, PreflightUp or the Registry's checks.
func Waiting(ctx context.Context, what string) { ui.Waiting(ctx, what) }

// Preflight runs d.Preflight within PreflightTimeout, with notes to the
// context's note function (ui.WithNotes) while it is slow.
func Preflight(ctx context.Context, d Driver) (string, error) {
	return one(ctx, d, d.Preflight)
}

// PreflightUp runs Preflight and, for an UpChecker, CheckUp: whether d can
// make and run nodes here now, within PreflightTimeout.
func PreflightUp(ctx context.Context, d Driver) (string, error) {
	return one(ctx, d, upCheck(d))
}

func upCheck(d Driver) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		detail, err := d.Preflight(ctx)
		if u, ok := d.(UpChecker); ok && err == nil {
			err = u.CheckUp(ctx)
		}
		return detail, err
	}
}

func newWait(d string) *ui.Wait { return ui.NewWait("the " + d + " driver's check") }

// one runs a single timed check, with its own progress notes.
func one(ctx context.Context, d Driver, check func(context.Context) (string, error)) (string, error) {
	w := newWait(d.Name())
	stop := ui.Watch(ctx, preflightLimit, w)
	defer stop()
	return timed(ctx, d.Name(), w, check)
}

// timed runs check with a time limit, recording in w what it waits for.
// A check past its limit is an *UnavailableError naming that.
func timed(ctx context.Context, driver string, w *ui.Wait, check func(context.Context) (string, error)) (string, error) {
	// The notes are the caller's: nothing under this check repeats them.
	start := time.Now()
	detail, late, err := ui.Within(ui.WithNotes(ctx, nil), w, preflightLimit, check)
	if late {
		return "", timeoutError(driver, w, time.Since(start))
	}
	return detail, err
}

func timeoutError(driver string, w *ui.Wait, waited time.Duration) error {
	reason := fmt.Sprintf("its check did not answer in %s", waited.Round(100*time.Millisecond))
	if what := w.What(); what != "" {
		reason += " (it was waiting for " + what + ")"
	}
	return &UnavailableError{Driver: driver, Reason: reason,
		Fix: "run `hwk doctor` to see every check of this host, or name another driver with --driver"}
}
