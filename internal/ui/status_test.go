package ui

import (
	"bytes"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fakeClock advances by step on every reading.
func fakeClock(step time.Duration) func() time.Time {
	t := time.Unix(0, 0)
	return func() time.Time {
		t = t.Add(step)
		return t
	}
}

func TestPlainSteps(t *testing.T) {
	var out bytes.Buffer
	s := NewStatus(&out, false)
	s.now = fakeClock(1500 * time.Millisecond)
	s.Start("Creating nodes")
	s.Start("Running kubeadm init") // ends the previous step as done
	s.End(errors.New("kubeadm exited 1\n[preflight] port 6443 in use"))
	s.End(nil) // nothing running: no output

	want := "• Creating nodes ...\n" +
		"✓ Creating nodes (1.5s)\n" +
		"• Running kubeadm init ...\n" +
		"✗ Running kubeadm init (1.5s)\n" +
		"    kubeadm exited 1\n" +
		"    [preflight] port 6443 in use\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestQuietPrintsNothing(t *testing.T) {
	var out bytes.Buffer
	s := NewStatus(&out, true)
	err := s.Step("Creating nodes", func() error { return errors.New("boom") })
	if err == nil || out.Len() != 0 {
		t.Errorf("err %v, output %q", err, out.String())
	}
}

func TestSpinnerOnTerminal(t *testing.T) {
	var out syncBuffer
	s := NewStatus(&out, false)
	s.tty = true // as if out were a terminal
	s.Start("Waiting for nodes")
	time.Sleep(250 * time.Millisecond)
	log := s.Writer(&out)
	log.Write([]byte("level=WARN msg=slow\n"))
	s.End(nil)

	got := out.String()
	if !strings.Contains(got, "⠋ Waiting for nodes") {
		t.Errorf("no spinner frame in %q", got)
	}
	if !strings.Contains(got, "\r\x1b[Klevel=WARN msg=slow\n") {
		t.Errorf("log line does not clear the spinner line: %q", got)
	}
	if !regexp.MustCompile(`\r\x1b\[K✓ Waiting for nodes \([0-9.]+m?s\)\n$`).MatchString(got) {
		t.Errorf("result does not replace the spinner: %q", got)
	}
	if strings.Contains(got, "• ") {
		t.Errorf("plain start line printed on a terminal: %q", got)
	}
	n := len(out.String())
	time.Sleep(250 * time.Millisecond)
	if len(out.String()) != n {
		t.Error("spinner still drawing after End")
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond:   "850ms",
		12345 * time.Millisecond: "12.3s",
		125 * time.Second:        "2m5s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestLoggerLevels(t *testing.T) {
	for v, want := range map[int]slog.Level{0: slog.LevelWarn, 1: slog.LevelInfo, 2: slog.LevelDebug} {
		var buf bytes.Buffer
		l := NewLogger(&buf, v)
		l.Debug("d")
		l.Info("i")
		l.Warn("w")
		lines := strings.Count(buf.String(), "\n")
		wantLines := map[slog.Level]int{slog.LevelWarn: 1, slog.LevelInfo: 2, slog.LevelDebug: 3}[want]
		if lines != wantLines {
			t.Errorf("-v %d printed %d lines, want %d:\n%s", v, lines, wantLines, buf.String())
		}
	}
}

// TestNote checks that a note is a line of its own in a log, the spinner's
// detail on a terminal (gone with the step's end), and nothing when quiet.
func TestNote(t *testing.T) {
	var out bytes.Buffer
	s := NewStatus(&out, false)
	s.Start("Checking the host")
	s.Note("waiting 1s for the hyperv driver's check")
	s.End(nil)
	if !strings.Contains(out.String(), "• Checking the host ...\n  waiting 1s for the hyperv driver's check\n✓ Checking the host") {
		t.Errorf("log: %q", out.String())
	}

	var tty syncBuffer
	s = NewStatus(&tty, false)
	s.tty = true
	s.Start("Checking the host")
	s.Note("waiting 1s for the hyperv driver's check")
	time.Sleep(250 * time.Millisecond)
	s.End(nil)
	if got := tty.String(); !strings.Contains(got, "Checking the host  waiting 1s for the hyperv driver's check") || strings.Contains(got, "check\n") {
		t.Errorf("terminal: %q", got)
	}

	out.Reset()
	s = NewStatus(&out, true)
	s.Note("waiting")
	if out.Len() != 0 {
		t.Errorf("quiet: %q", out.String())
	}
}
