package hostexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain makes the test binary also the program the tests run: with
// HOSTEXEC_HELPER set it writes lines to stderr, "out" to stdout and
// exits with the code given; "wait" has it wait a minute first.
func TestMain(m *testing.M) {
	if code := os.Getenv("HOSTEXEC_HELPER"); code == "wait" {
		time.Sleep(time.Minute)
		os.Exit(0)
	} else if code != "" {
		for i := 1; i <= 15; i++ {
			fmt.Fprintf(os.Stderr, "line %d\r\n", i)
		}
		fmt.Print("out")
		var c int
		fmt.Sscan(code, &c)
		os.Exit(c)
	}
	os.Exit(m.Run())
}

func TestRunFails(t *testing.T) {
	t.Setenv("HOSTEXEC_HELPER", "3")
	var own bytes.Buffer
	cmd := Command(context.Background(), os.Args[0], "-test.run=none", "an arg")
	cmd.Stderr = &own
	err := Run(cmd)
	e, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("err = %T %v, want *Error", err, err)
	}
	if e.Code != 3 {
		t.Errorf("Code = %d, want 3", e.Code)
	}
	if len(e.Stderr) != errorLines || e.Stderr[0] != "line 6" || e.Stderr[9] != "line 15" {
		t.Errorf("Stderr = %q, want lines 6 to 15", e.Stderr)
	}
	if !strings.Contains(own.String(), "line 1\r\n") {
		t.Errorf("the caller's stderr got %q, want all of it", own.String())
	}
	if want := ": exit status 3:\n  line 6\n"; !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "an arg") {
		t.Errorf("err = %q, want the program, %q and no arguments", err, want)
	}
	if got, want := e.Command(), " -test.run=none 'an arg'"; !strings.HasSuffix(got, want) {
		t.Errorf("Command() = %q, want it to end %q", got, want)
	}
}

func TestOutput(t *testing.T) {
	t.Setenv("HOSTEXEC_HELPER", "0")
	out, err := Output(Command(context.Background(), os.Args[0]))
	if err != nil || string(out) != "out" {
		t.Fatalf("Output = %q, %v; want out", out, err)
	}
	if _, err := Output(Command(context.Background(), "hwk-no-such-program")); !errors.Is(err, ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound", err)
	} else if e, _ := errors.AsType[*Error](err); e == nil || e.Code != -1 {
		t.Errorf("err = %#v, want an *Error with Code -1", err)
	}
}

func TestStart(t *testing.T) {
	t.Setenv("HOSTEXEC_HELPER", "2")
	wait, err := Start(Command(context.Background(), os.Args[0]))
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := errors.AsType[*Error](wait()); !ok || e.Code != 2 || len(e.Stderr) != errorLines {
		t.Errorf("wait() = %v, want an *Error with code 2 and the last lines", e)
	}
}

// A program its context kills fails with the context's error and Code
// -1, not with the exit Kill gave it (on Windows, exit status 1).
func TestRunContextEnds(t *testing.T) {
	t.Setenv("HOSTEXEC_HELPER", "wait")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Run(Command(ctx, os.Args[0]))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
	if e, ok := errors.AsType[*Error](err); !ok || e.Code != -1 {
		t.Errorf("err = %#v, want an *Error with Code -1", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("Run took %s: the program was not killed", took)
	}

	ctx, cancel = context.WithCancel(context.Background())
	wait, err := Start(Command(ctx, os.Args[0]))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("wait() = %v, want context.Canceled", err)
	}
}

func TestLookPath(t *testing.T) {
	_, err := LookPath("hwk-no-such-program", "apt-get install it")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "hwk-no-such-program is not installed") || !strings.HasSuffix(err.Error(), "\n  fix: apt-get install it") {
		t.Errorf("err = %v", err)
	}
}

func TestTail(t *testing.T) {
	tl := NewTail(8)
	fmt.Fprint(tl, "abc\r\n")
	fmt.Fprint(tl, "defgh\nij\n")
	if got := tl.String(); got != "efgh\nij\n" {
		t.Errorf("String = %q, want the last 8 bytes", got)
	}
	if got := tl.Lines(5); len(got) != 2 || got[0] != "efgh" || got[1] != "ij" {
		t.Errorf("Lines = %q", got)
	}
	if got := LastLines("a\nb\nc", 2); got != "b\nc" {
		t.Errorf("LastLines = %q", got)
	}
	if got := Clip(" abcdéf \n", 3); got != "...éf" {
		t.Errorf("Clip = %q, want the cut at the start of é", got)
	}
	if got := Clip("abc", 3); got != "abc" {
		t.Errorf("Clip = %q, want it whole", got)
	}
}

// TestRunOneWriter checks that stdout and stderr given as one writer stay
// one pipe (run under -race: a bytes.Buffer is not safe for two writers),
// and that an *os.File stderr reaches the program as is.
func TestRunOneWriter(t *testing.T) {
	t.Setenv("HOSTEXEC_HELPER", "1")
	var both bytes.Buffer
	cmd := Command(context.Background(), os.Args[0])
	cmd.Stdout, cmd.Stderr = &both, &both
	err := Run(cmd)
	if e, ok := errors.AsType[*Error](err); !ok || e.Code != 1 || len(e.Stderr) != errorLines {
		t.Errorf("err = %v, want an *Error with code 1 and the last lines", err)
	}
	if !strings.Contains(both.String(), "line 15") || !strings.Contains(both.String(), "out") {
		t.Errorf("the writer got %q, want stdout and stderr", both.String())
	}

	f, err := os.Create(t.TempDir() + "/stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd = Command(context.Background(), os.Args[0])
	cmd.Stderr = f
	err = Run(cmd)
	if cmd.Stderr != f {
		t.Errorf("Stderr is %T, want the file itself", cmd.Stderr)
	}
	if e, ok := errors.AsType[*Error](err); !ok || e.Code != 1 || len(e.Stderr) != 0 {
		t.Errorf("err = %v, want an *Error with no stderr kept", err)
	}
	if b, _ := os.ReadFile(f.Name()); !strings.Contains(string(b), "line 1") {
		t.Errorf("the file got %q", b)
	}
}
