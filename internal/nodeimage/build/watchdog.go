package build

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// watchdog stops an install whose current phase has outlived its budget.
type watchdog struct {
	budgets          nodeimage.InstallBudgets
	console, vm, drv string
	cancel           context.CancelCauseFunc
	mu               sync.Mutex
	phase            string
	since            time.Time
	last             string
	done             chan struct{}
}

func newWatchdog(b nodeimage.InstallBudgets, console, vm, driver string, cancel context.CancelCauseFunc) *watchdog {
	d := nodeimage.DefaultInstallBudgets
	b.Setup, b.Phase1, b.Phase2, b.Sysprep = cmp.Or(b.Setup, d.Setup), cmp.Or(b.Phase1, d.Phase1), cmp.Or(b.Phase2, d.Phase2), cmp.Or(b.Sysprep, d.Sysprep)
	b.Update = cmp.Or(b.Update, d.Update)
	w := &watchdog{budgets: b, console: console, vm: vm, drv: driver, cancel: cancel, phase: "Windows Setup", since: time.Now(), done: make(chan struct{})}
	go w.run()
	return w
}

// phaseOf returns the install phase a progress line belongs to.
func phaseOf(line string) string {
	switch {
	case strings.HasPrefix(line, "phase 2: sysprep"), strings.HasPrefix(line, "done:"):
		return "sysprep"
	case strings.HasPrefix(line, "phase 2"):
		return "phase 2"
	case strings.HasPrefix(line, "phase 1: installing update "), strings.HasPrefix(line, "phase 1: update "):
		return "update"
	}
	return "phase 1"
}

// startsUpdate reports whether the line starts an update, whose budget is
// its own.
func startsUpdate(line string) bool { return strings.HasPrefix(line, "phase 1: installing update ") }

func (w *watchdog) budget(phase string) time.Duration {
	return map[string]time.Duration{"Windows Setup": w.budgets.Setup, "phase 1": w.budgets.Phase1, "update": w.budgets.Update,
		"phase 2": w.budgets.Phase2, "sysprep": w.budgets.Sysprep}[phase]
}

// saw takes a progress line (without its prefix).
func (w *watchdog) saw(line string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = line
	if strings.HasPrefix(line, "FAILED:") || strings.HasPrefix(line, "the full log") {
		return // the guest's failure report: it powers off next
	}
	if p := phaseOf(line); p != w.phase || startsUpdate(line) {
		w.phase, w.since = p, time.Now()
	}
}

func (w *watchdog) run() {
	tick := time.NewTicker(min(w.budgets.Setup, w.budgets.Phase1, w.budgets.Update, w.budgets.Phase2, w.budgets.Sysprep, time.Minute) / 4)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-tick.C:
		}
		w.mu.Lock()
		var stalled *stalledError
		if budget := w.budget(w.phase); time.Since(w.since) > budget {
			stalled = &stalledError{phase: w.phase, budget: budget, last: w.last, console: w.console, vm: w.vm, driver: w.drv}
		}
		w.mu.Unlock()
		if stalled != nil {
			w.cancel(stalled)
			return
		}
	}
}

func (w *watchdog) stop() { close(w.done) }

// stalledError is an install phase that outlived its budget.
type stalledError struct {
	phase, last, console, vm, driver string
	budget                           time.Duration
}

func (e *stalledError) Error() string {
	last := "none yet"
	if e.last != "" {
		last = fmt.Sprintf("%q", e.last)
	}
	where := map[string]string{
		"Windows Setup": `Setup's own logs are in X:\Windows\Panther (while it runs from the ISO) and C:\Windows\Panther on the disk`,
		"phase 1":       `the guest's logs are C:\hwk-firstlogon.log and C:\hwk-provision.log`,
		"update":        `the guest's logs are C:\hwk-provision.log and DISM's C:\Windows\Logs\DISM\dism.log`,
		"phase 2":       `the guest's log is C:\hwk-provision.log`,
		"sysprep":       `sysprep's logs are in C:\Windows\System32\Sysprep\Panther`,
	}[e.phase]
	watch := map[string]string{"hyperv": "vmconnect localhost " + e.vm, "virtualbox": `VirtualBox's window for "` + e.vm + `"`, "libvirt": "virt-viewer " + e.vm}[e.driver]
	if watch == "" {
		watch = "the VM's screen"
	}
	return fmt.Sprintf("the install stopped: %s took longer than %s (the last progress line: %s)\n  console: %s; %s\n  fix: run the build again and watch the VM's screen (%s) to see where it waits",
		e.phase, e.budget, last, e.console, where, watch)
}
