package hostexec

import (
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// Tail keeps the last bytes written to it: the end of a program's
// output, for messages. A program's stdout and stderr may write to it
// from two goroutines.
type Tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

// NewTail returns a Tail that keeps the last max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String returns what the tail holds.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// Bytes returns a copy of what the tail holds.
func (t *Tail) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.b...)
}

// Lines returns up to the last n lines the tail holds, as the package's
// Lines does.
func (t *Tail) Lines(n int) []string { return Lines(t.String(), n) }

// Lines returns up to the last n lines of s, without line ends (carriage
// returns dropped) and without a last empty line.
func Lines(s string, n int) []string {
	s = strings.TrimRight(strings.ReplaceAll(s, "\r", ""), "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	return lines[max(0, len(lines)-n):]
}

// LastLines returns the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Clip returns the end of s, trimmed of spaces, in at most n bytes plus
// "..." before it where it was cut; the cut falls where a character
// starts, so the result stays UTF-8.
func Clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return "..." + s[i:]
}

// teeWriter writes to w and to the tail; a failure of w is w's alone.
type teeWriter struct {
	w io.Writer
	t *Tail
}

func (tw *teeWriter) Write(p []byte) (int, error) {
	tw.t.Write(p)
	return tw.w.Write(p)
}
