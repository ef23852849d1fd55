package drivers

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// slowDriver is a driver whose preflight records what it waits for, then
// waits for its context (honest) or for release (one that ignores it).
type slowDriver struct {
	Driver
	name    string
	honest  bool
	release chan struct{}
}

func (d *slowDriver) Name() string           { return d.name }
func (d *slowDriver) GuestOSes() []config.OS { return []config.OS{config.Linux} }
func (d *slowDriver) Preflight(ctx context.Context) (string, error) {
	Waiting(ctx, "the slow tool to answer")
	if d.honest {
		<-ctx.Done()
		return "", ctx.Err()
	}
	<-d.release
	return "late", nil
}

// TestPreflightTimeout checks that a preflight past its limit, whether it
// heeds its context or not, is an UnavailableError that names what it waited
// for; the caller hears what is pending after a second, and a driver that
// answers at once is not held up by one that does not.
func TestPreflightTimeout(t *testing.T) {
	old := preflightLimit
	preflightLimit = 2500 * time.Millisecond
	defer func() { preflightLimit = old }()

	var mu sync.Mutex
	var notes []string
	ctx := ui.WithNotes(context.Background(), func(s string) {
		mu.Lock()
		notes = append(notes, s)
		mu.Unlock()
	})
	release := make(chan struct{})
	defer close(release)
	r := NewRegistry(&slowDriver{name: "honest", honest: true}, &slowDriver{name: "stuck", release: release}, fastDriver{})
	began := time.Now()
	av := r.Check(ctx, "linux")
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("Check took %s", took)
	}
	for _, a := range av {
		switch a.Name {
		case "fast":
			if !a.Available {
				t.Errorf("fast: %+v", a)
			}
		default:
			if a.Available || a.Detail != "its check did not answer in 2.5s (it was waiting for the slow tool to answer)" {
				t.Errorf("%s: %+v", a.Name, a)
			}
		}
	}
	mu.Lock()
	got := strings.Join(notes, "\n")
	mu.Unlock()
	if !strings.Contains(got, "waiting 1s for the honest driver's check (the slow tool to answer), the stuck driver's check (the slow tool to answer) (at most 2.5s)") {
		t.Errorf("progress notes:\n%s", got)
	}
	if strings.Contains(got, "fast") {
		t.Errorf("a check that answered at once is in the notes:\n%s", got)
	}

	_, err := Preflight(context.Background(), &slowDriver{name: "honest", honest: true})
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.Driver != "honest" || !strings.Contains(ue.Reason, "did not answer in 2.5s") {
		t.Errorf("Preflight: %v", err)
	}
	if got := r.Reachable(context.Background()); len(got) != 1 || got[0].Name() != "fast" {
		t.Errorf("Reachable: %v", got)
	}
}

type fastDriver struct{ Driver }

func (fastDriver) Name() string                              { return "fast" }
func (fastDriver) GuestOSes() []config.OS                    { return []config.OS{config.Linux} }
func (fastDriver) Preflight(context.Context) (string, error) { return "ok", nil }
