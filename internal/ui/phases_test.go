package ui

import (
	"strings"
	"testing"
	"time"
)

// TestPhasesLogLines checks that off a terminal there is a line under the
// running step each time a wait changes phase, none for a phase repeated,
// and the last line when it is done; quiet prints nothing.
func TestPhasesLogLines(t *testing.T) {
	var out syncBuffer
	st := NewStatus(&out, false)
	st.Start("Creating nodes")
	p := NewPhases(st)
	p.Set("demo-win-1", "Windows Setup running")
	p.Set("demo-win-1", "Windows Setup running")
	p.Set("demo-win-1", "applying its seed")
	p.Done("demo-win-1", "booted after 4m0s")
	st.End(nil)
	want := "• Creating nodes ...\n    demo-win-1: Windows Setup running\n    demo-win-1: applying its seed\n    demo-win-1: booted after 4m0s\n✓ Creating nodes"
	if !strings.HasPrefix(out.String(), want) {
		t.Errorf("got %q\nwant it to begin %q", out.String(), want)
	}

	var quiet syncBuffer
	NewPhases(NewStatus(&quiet, true)).Set("demo-win-1", "Windows Setup running")
	NewPhases(nil).Set("demo-win-1", "Windows Setup running") // nil shows nothing
	if quiet.String() != "" {
		t.Errorf("quiet printed %q", quiet.String())
	}
}

// TestPhasesOnTerminal checks that on a terminal the phases are the
// spinner's detail, every wait's at once, and a finished one leaves it.
func TestPhasesOnTerminal(t *testing.T) {
	var out syncBuffer
	st := NewStatus(&out, false)
	st.tty = true // as if out were a terminal
	st.Start("Creating nodes")
	p := NewPhases(st)
	p.Set("demo-win-2", "applying its seed")
	p.Set("demo-win-1", "Windows Setup running")
	time.Sleep(250 * time.Millisecond)
	if !strings.Contains(out.String(), "Creating nodes  demo-win-1: Windows Setup running; demo-win-2: applying its seed") {
		t.Errorf("no phases on the spinner line: %q", out.String())
	}
	p.Done("demo-win-1", "")
	st.mu.Lock()
	detail := st.detail
	st.mu.Unlock()
	if detail != "demo-win-2: applying its seed" {
		t.Errorf("detail after one is done: %q", detail)
	}
	st.End(nil)
}
