package ui

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTransferLines checks that the rate counts only what moved in this run
// (a resumed download starts at what it had), the time left follows from
// it, a finished transfer keeps its rate and shows done, and estimated
// totals show as such, without a time left.
func TestTransferLines(t *testing.T) {
	clock := time.Unix(0, 0)
	tr := &Transfers{now: func() time.Time { return clock }, items: map[string]*transfer{}}
	tr.Update("qcow2", 100<<20, 500<<20) // resumed at 100 MiB
	tr.Update("docker", 0, 50<<20)
	clock = clock.Add(2 * time.Second)
	tr.Update("qcow2", 300<<20, 500<<20) // 200 MiB in 2 s
	tr.Update("docker", 50<<20, 50<<20)  // done after 2 s
	clock = clock.Add(3 * time.Second)
	got := tr.lines(clock.Add(0))
	// qcow2: 200 MiB in 5 s = 40 MiB/s, 200 MiB left = 5 s.
	want := []string{
		"docker 50 MiB of 50 MiB (25 MiB/s, done)",
		"qcow2 300 MiB of 500 MiB (40 MiB/s, 5.0s left)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	tr.Approximate = true
	got = tr.lines(clock)
	if !strings.Contains(got[1], "of ~500 MiB") || strings.Contains(got[1], "left") {
		t.Errorf("approximate: %q", got[1])
	}
}

// TestTransfersLogLines checks that off a terminal there is a line per
// transfer every few seconds, under the running step.
func TestTransfersLogLines(t *testing.T) {
	var out syncBuffer
	st := NewStatus(&out, false)
	st.Start("Pulling")
	tr := NewTransfers(st, nil)
	tr.every = 100 * time.Millisecond
	tr.Update("vhdx", 1<<20, 4<<20)
	time.Sleep(600 * time.Millisecond)
	tr.Stop()
	st.End(nil)
	if !strings.Contains(out.String(), "    vhdx 1 MiB of 4 MiB (") {
		t.Errorf("no progress line in %q", out.String())
	}
	quiet := NewStatus(&out, true)
	n := len(out.String())
	qt := NewTransfers(quiet, nil)
	qt.Update("vhdx", 1, 2)
	time.Sleep(400 * time.Millisecond)
	qt.Stop()
	if len(out.String()) != n {
		t.Errorf("a quiet status printed progress: %q", out.String()[n:])
	}
}
