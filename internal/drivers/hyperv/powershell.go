package hyperv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Runner runs one PowerShell script and decodes what it returns (the
// script's output, as JSON) into out, which may be nil. A script that
// throws comes back as a *PSError.
type Runner interface {
	Run(ctx context.Context, script string, out any) error
}

// PSError is an error record from PowerShell, as structured as PowerShell
// keeps it.
type PSError struct {
	Message string `json:"message"`
	// ID is the FullyQualifiedErrorId ("ObjectNotFound,Microsoft.HyperV.PowerShell.Commands.GetVM").
	ID       string `json:"id"`
	Category string `json:"category"`
	// Exception is the .NET exception's type.
	Exception string `json:"exception"`
	Target    string `json:"target"`
}

func (e *PSError) Error() string {
	msg := strings.TrimSpace(e.Message)
	if e.Category != "" && e.Category != "NotSpecified" {
		msg += " (" + e.Category + ")"
	}
	return msg
}

// IsNotFound reports whether err is PowerShell reporting that the object
// asked for does not exist.
func IsNotFound(err error) bool {
	var pe *PSError
	return errors.As(err, &pe) && (pe.Category == "ObjectNotFound" || strings.HasPrefix(pe.ID, "ObjectNotFound"))
}

// Markers frame each reply on the session's output; other lines are
// stray output (warnings a cmdlet printed), kept for the log.
const (
	resultMarker = "<<hwk-result>>"
	endMarker    = "<<hwk-end>>"
)

// Wrap returns the whole script a request runs: script in a block whose
// output becomes JSON, and whose first terminating error becomes a
// structured record. Depth 8 keeps nested objects (a VM's adapters'
// addresses) without PowerShell 5.1's silent truncation at 2.
func Wrap(script string) string {
	return `$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'
try {
    $hwkOut = & {
` + script + `
    }
    '` + resultMarker + `' + (Microsoft.PowerShell.Utility\ConvertTo-Json -InputObject @{ ok = $true; out = $hwkOut } -Depth 8 -Compress)
} catch {
    $e = $_
    $record = @{
        message = $e.Exception.Message
        id = [string]$e.FullyQualifiedErrorId
        category = [string]$e.CategoryInfo.Category
        exception = $e.Exception.GetType().FullName
        target = [string]$e.TargetObject
    }
    '` + resultMarker + `' + (Microsoft.PowerShell.Utility\ConvertTo-Json -InputObject @{ ok = $false; error = $record } -Depth 4 -Compress)
}
'` + endMarker + `'
`
}

// requestLine returns the single line that runs a wrapped script in the
// session: PowerShell reading commands from stdin runs each line as it
// comes, so a multi-line script travels base64-encoded.
func requestLine(script string) string {
	b64 := base64.StdEncoding.EncodeToString([]byte(Wrap(script)))
	return "& ([ScriptBlock]::Create([Text.Encoding]::UTF8.GetString([Convert]::FromBase64String('" + b64 + "'))))\n"
}

// sessionSetup is the session's first line: UTF-8 output, so names
// outside ASCII reach hwk intact. The encoding is made without a byte
// order mark: [Text.Encoding]::UTF8 carries one (its preamble), which a
// writer may put before the first line it writes (PowerShell/PowerShell
// #7634, #24683); readReply drops one all the same.
const sessionSetup = "[Console]::OutputEncoding = [Text.UTF8Encoding]::new($false)\n"

// readyLine is the session's second line: PowerShell prints readyMarker
// once it runs what it reads, and the session waits for that, at most
// StartTimeout, before its first request, so that a powershell.exe that
// starts and never answers (Wine's, a stub that reads its stdin and prints
// nothing: wine programs/powershell/main.c) is an error, not a hang.
const (
	readyMarker = "<<hwk-ready>>"
	readyLine   = "'" + readyMarker + "'\n"
)

// StartTimeout is how long a new session waits for PowerShell's first
// answer.
// Windows PowerShell 5.1 answers in about a second, and up to several the
// first time after a boot or with an antivirus scanning it.
const StartTimeout = 30 * time.Second

// reply is one framed answer.
type reply struct {
	OK    bool            `json:"ok"`
	Out   json.RawMessage `json:"out"`
	Error *PSError        `json:"error"`
}

// readReady reads r up to the line PowerShell prints for readyLine.
// Other lines go to stray.
func readReady(r *bufio.Reader, stray io.Writer) error {
	for {
		line, err := r.ReadString('\n')
		line = strings.TrimPrefix(strings.TrimRight(line, "\r\n"), "\ufeff")
		switch {
		case line == readyMarker:
			return nil
		case line != "":
			fmt.Fprintln(stray, line)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("PowerShell exited before it answered")
			}
			return err
		}
	}
}

// readReply reads one reply from r: lines up to the end marker, with the
// result line among them. Stray lines go to stray.
func readReply(r *bufio.Reader, stray io.Writer) (*reply, error) {
	var result string
	for {
		line, err := r.ReadString('\n')
		line = strings.TrimPrefix(strings.TrimRight(line, "\r\n"), "\ufeff")
		switch {
		case strings.HasPrefix(line, resultMarker):
			result = strings.TrimPrefix(line, resultMarker)
		case line == endMarker:
			if result == "" {
				return nil, errors.New("PowerShell ended a reply without a result")
			}
			var rep reply
			if err := json.Unmarshal([]byte(result), &rep); err != nil {
				return nil, fmt.Errorf("PowerShell's reply is not JSON: %w (%.200s)", err, result)
			}
			return &rep, nil
		case line != "":
			fmt.Fprintln(stray, line)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("PowerShell exited in the middle of a reply")
			}
			return nil, err
		}
	}
}

// decode turns a reply into out or an error.
func (rep *reply) decode(out any) error {
	if !rep.OK {
		if rep.Error == nil {
			return errors.New("PowerShell failed without an error record")
		}
		return rep.Error
	}
	if out == nil || len(rep.Out) == 0 || string(rep.Out) == "null" {
		return nil
	}
	if err := json.Unmarshal(rep.Out, out); err != nil {
		return fmt.Errorf("PowerShell's reply: %w (%.200s)", err, rep.Out)
	}
	return nil
}

// list is a collection a script returns as its whole output, which
// decodes from null (no objects), one object, or an array of several.
type list[T any] []T

func (l *list[T]) UnmarshalJSON(b []byte) error {
	// Why: the session collects a script's output by assignment ($hwkOut =
	// & {...}), and PowerShell unrolls output there whatever the script
	// wrapped it in (@() included) (about_Pipelines, about_Arrays). A
	// property of an object the script makes keeps its array, so only
	// whole outputs need this.
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		*l = nil
		return nil
	case b[0] == '[':
		var items []T
		if err := json.Unmarshal(b, &items); err != nil {
			return err
		}
		*l = items
		return nil
	}
	var one T
	if err := json.Unmarshal(b, &one); err != nil {
		return err
	}
	*l = list[T]{one}
	return nil
}

// starts counts PowerShell processes started by this hwk process, for
// the figure the driver is held to: one per command run.
var starts atomic.Int64

// Starts returns how many PowerShell processes this hwk process has started.
func Starts() int64 { return starts.Load() }

// process is a running PowerShell reading requests on stdin.
type process interface {
	io.Writer // stdin
	Stdout() io.Reader
	Kill() error
}

// Session is one long-lived PowerShell: every script of a command run
// goes to it in turn, one at a time, so a whole `hwk up` starts
// PowerShell once.
type Session struct {
	// Why one process for every host operation: the Hyper-V module is the
	// interface Microsoft documents and keeps compatible, and one process
	// avoids PowerShell's start-up cost (about half a second, more with
	// the Hyper-V module loading) per cmdlet.

	// start launches the process, its stderr to the given writer; tests
	// give a fake.
	start func(stderr io.Writer) (process, error)
	// Log receives stray output.
	Log io.Writer

	mu   sync.Mutex
	proc process
	out  *bufio.Reader
	// stderr keeps the end of what the process wrote to its stderr, for
	// the error when it dies.
	stderr *hostexec.Tail
	// startTimeout replaces StartTimeout (tests).
	startTimeout time.Duration
	// failed is why PowerShell did not start or answer: every later
	// script fails with it at once, so that a command whose PowerShell
	// is missing or silent waits for it once, not once per check.
	failed error
}

// Run implements Runner.
func (s *Session) Run(ctx context.Context, script string, out any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.Log
	if log == nil {
		log = io.Discard
	}
	if s.failed != nil {
		return s.failed
	}
	if s.proc == nil {
		s.stderr = hostexec.NewTail(1024)
		p, err := s.start(io.MultiWriter(log, s.stderr))
		if err != nil {
			s.failed = &noPowerShellError{err}
			return s.failed
		}
		starts.Add(1)
		s.proc, s.out = p, bufio.NewReaderSize(p.Stdout(), 1<<16)
		if _, err := io.WriteString(p, sessionSetup+readyLine); err != nil {
			s.reset()
			return fmt.Errorf("start PowerShell: %w", err)
		}
		if err := s.awaitReady(ctx, log); err != nil {
			if errors.Is(err, errNoPowerShell) {
				s.failed = err
			}
			return err
		}
	}
	drivers.Waiting(ctx, "Windows PowerShell's answer to a script")
	if _, err := io.WriteString(s.proc, requestLine(script)); err != nil {
		s.reset()
		return fmt.Errorf("PowerShell: %w", err)
	}
	type result struct {
		rep *reply
		err error
	}
	done := make(chan result, 1)
	// The reader is taken here: on cancel, reset clears s.out while this
	// goroutine may still be reading.
	rd := s.out
	go func() {
		rep, err := readReply(rd, log)
		done <- result{rep, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			// Once the process is gone (reset waits for it), its stderr
			// may say why.
			stderr := s.stderr
			s.reset()
			if last := strings.TrimSpace(strings.ToValidUTF8(stderr.String(), "")); last != "" {
				return fmt.Errorf("%w; the end of its stderr: %s", r.err, last)
			}
			return r.err
		}
		return r.rep.decode(out)
	case <-ctx.Done():
		// The script may run on; only a new session is safe.
		s.reset()
		<-done
		return ctx.Err()
	}
}

// awaitReady waits for a new process's answer to readyLine, at most
// StartTimeout. On failure the process is gone.
func (s *Session) awaitReady(ctx context.Context, log io.Writer) error {
	limit := s.startTimeout
	if limit == 0 {
		limit = StartTimeout
	}
	drivers.Waiting(ctx, "Windows PowerShell (powershell.exe) to start and answer")
	done := make(chan error, 1)
	rd := s.out
	go func() { done <- readReady(rd, log) }()
	t := time.NewTimer(limit)
	defer t.Stop()
	var err error
	select {
	case err = <-done:
		if err == nil {
			return nil
		}
		s.reset()
	case <-t.C:
		err = fmt.Errorf("powershell.exe started but did not answer in %s: it is not a working Windows PowerShell 5.1, or something holds it up (an antivirus scanning it; Wine's powershell.exe is a stub that never answers)", limit)
		s.reset()
		<-done
	case <-ctx.Done():
		s.reset()
		<-done
		return ctx.Err()
	}
	stderr := s.stderr
	if last := strings.TrimSpace(strings.ToValidUTF8(stderr.String(), "")); last != "" {
		err = fmt.Errorf("%w; the end of its stderr: %s", err, last)
	}
	return &noPowerShellError{err}
}

// noPowerShellError is PowerShell failing to start (or a host without
// it); it matches errNoPowerShell.
type noPowerShellError struct{ err error }

func (e *noPowerShellError) Error() string { return e.err.Error() }

func (e *noPowerShellError) Unwrap() error { return e.err }

func (e *noPowerShellError) Is(target error) bool { return target == errNoPowerShell }

// reset kills the process; the next Run starts another.
func (s *Session) reset() {
	if s.proc != nil {
		_ = s.proc.Kill()
	}
	s.proc, s.out = nil, nil
}

// Close ends the session; the next script starts PowerShell again, even
// after one that did not start.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reset()
	s.failed = nil
	return nil
}

// Quote returns s as a PowerShell single-quoted string, for scripts other
// drivers send to the host through a Runner.
func Quote(s string) string { return quote(s) }

// quote returns s as a PowerShell single-quoted string, in which nothing is
// expanded. PowerShell ends such a string at ' and at the typographic
// single quotes too, so each of them is doubled.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		b.WriteRune(r)
		if strings.ContainsRune("'\u2018\u2019\u201a\u201b", r) {
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// run runs a script; a host without PowerShell is the driver unavailable.
// Other failures (an error record, PowerShell dying, a reply hwk cannot
// read) are the operation's.
func (d *Driver) run(ctx context.Context, script string, out any) error {
	err := d.ps.Run(ctx, script, out)
	if errors.Is(err, errNoPowerShell) {
		return &drivers.UnavailableError{Driver: config.DriverHyperV, Reason: err.Error(), Fix: "the Hyper-V driver needs Windows 10/11 Pro or Enterprise, or Windows Server, with Windows PowerShell"}
	}
	return err
}
