// Package hostexec runs programs on the host (qemu-img, go, kubeadm,
// powershell.exe, VBoxManage, wsl.exe). Command makes one; Run, Output
// and Start keep the end of its stderr and return an *Error that names
// the command, its exit code and those last lines. Tail keeps the end of
// any output. The drivers' tool runners are built on it and keep their
// own tools' quirks.
package hostexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"weak"
)

// ErrNotFound is the error a command whose program is not installed
// wraps (errors.Is).
var ErrNotFound = exec.ErrNotFound

// stderrKeep bounds the stderr an Error keeps: a few dozen long lines.
const stderrKeep = 16 << 10

// errorLines is how many of stderr's last lines an Error shows.
const errorLines = 10

// Command returns the command that runs name with args, killed when ctx
// ends; Run, Output and Start then return ctx's error (errors.Is) with
// Code -1. Set its Dir, Env, Stdin, Stdout and Stderr as for exec.Cmd
// before Run, Output or Start.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	key := weak.Make(cmd)
	contexts.Store(key, ctx)
	runtime.AddCleanup(cmd, func(k weak.Pointer[exec.Cmd]) { contexts.Delete(k) }, key)
	return cmd
}

// contexts holds each Command's context, for wrap. Why: Wait reports a
// killed program's exit before the context's error, and on Windows Kill
// (TerminateProcess with 1) looks like the program's own "exit status 1".
var contexts sync.Map // weak.Pointer[exec.Cmd] → context.Context

// LookPath returns where name is installed, or an error wrapping
// ErrNotFound that names the missing program and how to install it (fix).
func LookPath(name, fix string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is not installed: %w\n  fix: %s", name, err, fix)
	}
	return p, nil
}

// Error is a host program that failed.
type Error struct {
	// Argv is the command line, the program first.
	Argv []string
	// Code is the exit code, or -1 when the program did not start, a
	// signal ended it or its context did.
	Code int
	// Stderr is the last lines of its stderr, without line ends.
	Stderr []string
	// Err is what exec returned.
	Err error
}

// Error names the program and its subcommand (go build, qemu-img
// convert), the failure, and the last lines of stderr.
func (e *Error) Error() string {
	name := "?"
	if len(e.Argv) > 0 {
		name = filepath.Base(e.Argv[0])
	}
	if len(e.Argv) > 1 && e.Argv[1] != "" && !strings.HasPrefix(e.Argv[1], "-") {
		name += " " + e.Argv[1]
	}
	msg := fmt.Sprintf("%s: %v", name, e.Err)
	if len(e.Stderr) > 0 {
		msg += ":\n  " + strings.Join(e.Stderr, "\n  ")
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Command returns the command line as a shell would take it: the program's
// base name, then each argument, quoted where it has spaces or quotes.
func (e *Error) Command() string {
	var b strings.Builder
	for i, a := range e.Argv {
		if i == 0 {
			a = filepath.Base(a)
		} else {
			b.WriteByte(' ')
		}
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		b.WriteString(a)
	}
	return b.String()
}

// StderrText returns the kept stderr as one string.
func (e *Error) StderrText() string { return strings.Join(e.Stderr, "\n") }

// Run runs cmd to its end. Its stderr also goes to a Tail, except when
// cmd.Stderr is an *os.File, which the program gets as its own handle; a
// failure is an *Error with the tail's last lines. A cmd whose Stdout and
// Stderr are one writer still writes both through one pipe.
func Run(cmd *exec.Cmd) error {
	t := keepStderr(cmd)
	return wrap(cmd, cmd.Run(), t)
}

// Output runs cmd to its end and returns its stdout; a failure is an
// *Error, as Run's.
func Output(cmd *exec.Cmd) ([]byte, error) {
	if cmd.Stdout != nil {
		return nil, errors.New("hostexec: Stdout already set")
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	err := Run(cmd)
	return out.Bytes(), err
}

// Start starts cmd and returns a wait that ends it: wait returns an
// *Error, as Run's, when the program fails.
func Start(cmd *exec.Cmd) (wait func() error, err error) {
	t := keepStderr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, wrap(cmd, err, t)
	}
	return func() error { return wrap(cmd, cmd.Wait(), t) }, nil
}

func keepStderr(cmd *exec.Cmd) *Tail {
	t := NewTail(stderrKeep)
	switch stderr := cmd.Stderr; stderr.(type) {
	case nil:
		cmd.Stderr = t
	case *os.File:
		// Why: a file (a console, a log, a pipe's end) is handed to the
		// program as is; a tee would put a pipe in its place, which a
		// StderrPipe's end does not survive and a grandchild holding it
		// would keep Wait waiting for.
	default:
		tee := &teeWriter{stderr, t}
		if sameWriter(cmd.Stdout, stderr) {
			// Why: os/exec gives equal writers one pipe, so one goroutine
			// writes them in order; a writer that is not safe for two
			// goroutines must keep that.
			cmd.Stdout = tee
		}
		cmd.Stderr = tee
	}
	return t
}

// sameWriter reports whether a and b are the same writer, as os/exec
// compares Stdout and Stderr (an uncomparable writer is not the same).
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

func wrap(cmd *exec.Cmd, err error, t *Tail) error {
	if err == nil {
		return nil
	}
	code := -1
	var ended error
	if ctx, ok := contexts.Load(weak.Make(cmd)); ok {
		ended = ctx.(context.Context).Err()
	}
	if ended != nil && !errors.Is(err, ended) {
		err = fmt.Errorf("%w (%w)", ended, err)
	} else if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	}
	return &Error{Argv: cmd.Args, Code: code, Stderr: t.Lines(errorLines), Err: err}
}
