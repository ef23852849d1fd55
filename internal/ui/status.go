// Package ui is how hwk talks to a person: step lines with timings, a
// spinner on a terminal, and the slog logger behind -v.
package ui

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// Marks at the start of step lines.
const (
	markStart = "•"
	markOK    = "✓"
	markFail  = "✗"
)

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Status prints one line per step of a longer operation ("✓ Creating nodes
// (12.3s)", a failed step's error below it): on a terminal a spinner that
// the result line replaces, elsewhere a start line of its own. Quiet prints
// nothing; failures still reach the user as the command's error.
type Status struct {
	out   io.Writer
	tty   bool
	quiet bool
	now   func() time.Time

	mu      sync.Mutex
	step    string
	detail  string
	started time.Time
	stop    chan struct{}
	done    chan struct{}
}

// NewStatus writes to out. The spinner is used only when out is a
// terminal that can draw it: not TERM=dumb, which a pseudo-terminal that
// is only a log (nektos/act's steps, an editor's shell) sets, and on
// Windows a console that takes escape sequences.
func NewStatus(out io.Writer, quiet bool) *Status {
	return &Status{out: out, tty: isTerminal(out), quiet: quiet, now: time.Now}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb" && drawsEscapes(f)
}

// Start begins a step, ending any step still running as a success.
func (s *Status) Start(step string) {
	s.End(nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.step, s.started = step, s.now()
	if s.quiet {
		return
	}
	if !s.tty {
		fmt.Fprintf(s.out, "%s %s ...\n", markStart, step)
		return
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.spin(s.stop, s.done)
}

func (s *Status) spin(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		s.mu.Lock()
		line := s.step
		if s.detail != "" {
			line += "  " + s.detail
		}
		fmt.Fprintf(s.out, "\r\x1b[K%s %s ", spinnerFrames[i%len(spinnerFrames)], line)
		s.mu.Unlock()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// End finishes the running step, as a failure when err is not nil; it
// does nothing when no step runs.
func (s *Status) End(err error) {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.stop, s.done = nil, nil
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.step == "" {
		return
	}
	step, took := s.step, s.now().Sub(s.started)
	s.step, s.detail = "", ""
	if s.quiet {
		return
	}
	if s.tty {
		fmt.Fprint(s.out, "\r\x1b[K")
	}
	mark := markOK
	if err != nil {
		mark = markFail
	}
	fmt.Fprintf(s.out, "%s %s (%s)\n", mark, step, FormatDuration(took))
	if err != nil {
		for _, line := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
			fmt.Fprintf(s.out, "    %s\n", line)
		}
	}
}

// Detail sets what the spinner shows after the running step's name (a
// transfer's progress). It shows only on a terminal: elsewhere a line
// that changes every moment has no place in a log.
func (s *Status) Detail(detail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.detail = detail
}

// Note shows a passing word about the running step (what it waits
// for): on a terminal as the spinner's detail, which the step's end
// clears; elsewhere, and between steps, as an indented line of its own.
// Quiet shows nothing.
func (s *Status) Note(note string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.quiet:
	case s.tty && s.stop != nil:
		s.detail = note
	default:
		fmt.Fprintf(s.out, "  %s\n", note)
	}
}

// Terminal reports whether the status draws on a terminal.
func (s *Status) Terminal() bool { return s.tty && !s.quiet }

// Step runs fn as one step.
func (s *Status) Step(step string, fn func() error) error {
	s.Start(step)
	err := fn()
	s.End(err)
	return err
}

// Writer returns a writer for log lines that may appear while a step runs:
// on a terminal it clears the spinner first, so the two never share a
// line. The spinner redraws itself below on its next tick.
func (s *Status) Writer(w io.Writer) io.Writer {
	return &clearingWriter{s: s, w: w}
}

type clearingWriter struct {
	s *Status
	w io.Writer
}

func (c *clearingWriter) Write(p []byte) (int, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.s.tty && c.s.stop != nil {
		fmt.Fprint(c.s.out, "\r\x1b[K")
	}
	return c.w.Write(p)
}

// FormatDuration rounds a step's time the way people read it: 850ms, 12.3s,
// 2m5s.
func FormatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	default:
		return d.Round(time.Second).String()
	}
}
