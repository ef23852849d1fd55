package drivers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Registry holds the drivers built into this hwk and chooses among them.
type Registry struct {
	byName map[string]Driver
}

// NewRegistry makes a registry of ds.
func NewRegistry(ds ...Driver) *Registry {
	r := &Registry{byName: map[string]Driver{}}
	for _, d := range ds {
		r.byName[d.Name()] = d
	}
	return r
}

// Names lists the registered drivers, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Get returns the driver called name.
func (r *Registry) Get(name string) (Driver, error) {
	if d, ok := r.byName[name]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("driver %q is not part of this hwk build; built-in drivers: %s", name, strings.Join(r.Names(), ", "))
}

// Availability is one driver's standing on this host.
type Availability struct {
	Name      string      `json:"name"`
	GuestOSes []config.OS `json:"guestOSes"`
	Available bool        `json:"available"`
	// Detail is what preflight found when available, and why not otherwise.
	Detail string `json:"detail"`
	// Fix is how to make an unavailable driver usable.
	Fix string `json:"fix,omitempty"`
	// Emulated reports whether the driver works here only by emulating the CPU.
	Emulated bool `json:"emulated,omitempty"`
	// DefaultFor lists the node operating systems this driver is the
	// default for on this host.
	DefaultFor []config.OS `json:"defaultFor,omitempty"`
	// Experimental marks a driver that is never picked by default, with
	// its known limits.
	Experimental bool   `json:"experimental,omitempty"`
	Limits       string `json:"limits,omitempty"`
}

// Check runs every driver's preflight (concurrently: each may wait on a
// daemon or a hypervisor), each within PreflightTimeout, and reports them
// sorted by name, with the default per node OS on hostOS marked. The
// context's note function (ui.WithNotes) hears of checks still running
// after a second.
func (r *Registry) Check(ctx context.Context, hostOS string) []Availability {
	out := make([]Availability, len(r.byName))
	r.each(ctx, func(i int, d Driver, w *ui.Wait) { out[i] = check(ctx, d, w) })
	for _, os := range []config.OS{config.Linux, config.Windows} {
		if name, ok := pick(out, hostOS, os); ok {
			i := slices.IndexFunc(out, func(a Availability) bool { return a.Name == name })
			out[i].DefaultFor = append(out[i].DefaultFor, os)
		}
	}
	return out
}

// Reachable returns every driver whose Preflight passes here now, in name
// order: the drivers that may hold machines to remove. The preflights run
// concurrently, each within PreflightTimeout, with notes as Check's.
func (r *Registry) Reachable(ctx context.Context) []Driver {
	ok := make([]Driver, len(r.byName))
	r.each(ctx, func(i int, d Driver, w *ui.Wait) {
		if _, err := timed(ctx, d.Name(), w, d.Preflight); err == nil {
			ok[i] = d
		}
	})
	return slices.DeleteFunc(ok, func(d Driver) bool { return d == nil })
}

// each runs check on every driver at once, the i-th in name order with
// its own wait, and tells the context's note function about those still
// running.
func (r *Registry) each(ctx context.Context, check func(i int, d Driver, w *ui.Wait)) {
	names := r.Names()
	waits := make([]*ui.Wait, len(names))
	for i, n := range names {
		waits[i] = newWait(n)
	}
	stop := ui.Watch(ctx, preflightLimit, waits...)
	defer stop()
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() { check(i, r.byName[n], waits[i]) })
	}
	wg.Wait()
}

func check(ctx context.Context, d Driver, w *ui.Wait) Availability {
	a := Availability{Name: d.Name(), GuestOSes: d.GuestOSes()}
	if e, ok := d.(Experimental); ok {
		a.Experimental, a.Limits = true, e.Limits()
	}
	detail, err := timed(ctx, d.Name(), w, upCheck(d))
	if err == nil {
		a.Available, a.Detail = true, detail
		if e, ok := d.(Emulator); ok {
			a.Emulated = e.Emulated()
		}
		return a
	}
	var ue *UnavailableError
	if errors.As(err, &ue) {
		a.Detail, a.Fix = ue.Reason, ue.Fix
	} else {
		a.Detail = err.Error()
	}
	return a
}

// Default picks the driver for nodes of nodeOS on hostOS when the config
// names none: the first available driver in config.DriverPreference(hostOS)
// that can host nodeOS, preferring any that runs guests at hardware speed.
// An experimental driver is used only when named.
func (r *Registry) Default(ctx context.Context, hostOS string, nodeOS config.OS) (Driver, error) {
	av := r.Check(ctx, hostOS)
	if name, ok := pick(av, hostOS, nodeOS); ok {
		return r.byName[name], nil
	}
	var why []string
	for _, a := range av {
		switch {
		case !slices.Contains(a.GuestOSes, nodeOS):
			why = append(why, fmt.Sprintf("%s: cannot host %s nodes", a.Name, nodeOS))
		case !a.Available:
			w := fmt.Sprintf("%s: %s", a.Name, a.Detail)
			if a.Fix != "" {
				w += " (fix: " + a.Fix + ")"
			}
			why = append(why, w)
		}
	}
	return nil, fmt.Errorf("no driver on this host can run %s nodes:\n  %s", nodeOS, strings.Join(why, "\n  "))
}

func pick(av []Availability, hostOS string, nodeOS config.OS) (string, bool) {
	for _, emulated := range []bool{false, true} {
		for _, name := range config.DriverPreference(hostOS) {
			for _, a := range av {
				if a.Name == name && a.Available && !a.Experimental && a.Emulated == emulated && slices.Contains(a.GuestOSes, nodeOS) {
					return name, true
				}
			}
		}
	}
	return "", false
}
