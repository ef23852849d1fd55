// Command fakecli stands in for a program a driver runs (VBoxManage,
// wsl.exe) in the driver's tests: the driver finds and starts it as it
// would the real one, and it answers each call from a transcript (see
// drivers/internal/transcript), keeping what it has done in
// HWK_FAKE_CLI_DIR between calls, with what each call read on stdin. A call the transcript does not expect is
// recorded there for the test to fail on, and answered as the program it
// stands in for answers a failure: VBoxManage with an error line on
// stderr and exit status 1, wsl.exe with a message on stdout in UTF-16LE
// and exit status -1.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/hwk-dev/hwk/drivers/internal/transcript"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// wsl says this fake is wsl.exe.
var wsl = strings.HasPrefix(strings.ToLower(filepath.Base(os.Args[0])), "wsl")

func run(args []string) int {
	dir := os.Getenv("HWK_FAKE_CLI_DIR")
	if dir == "" {
		return fail("", args, "the fake needs HWK_FAKE_CLI_DIR")
	}
	unlock, err := lock(filepath.Join(dir, "lock"))
	if err != nil {
		return fail(dir, args, err.Error())
	}
	defer unlock()
	// What the caller writes to stdin is kept beside the call, for the
	// test to read (a nil stdin in Go is /dev/null: nothing).
	if in, _ := io.ReadAll(os.Stdin); len(in) > 0 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("stdin.%d", countLines(filepath.Join(dir, "calls.log")))), in, 0o644); err != nil {
			return fail(dir, args, err.Error())
		}
	}
	appendLine(filepath.Join(dir, "calls.log"), mustJSON(args))

	data, err := os.ReadFile(filepath.Join(dir, "transcript.txt"))
	if err != nil {
		return fail(dir, args, err.Error())
	}
	t, err := transcript.Parse(os.Getenv("HWK_FAKE_CLI_TRANSCRIPT"), data)
	if err != nil {
		return fail(dir, args, err.Error())
	}
	replies, err := transcript.LoadReplies(os.Getenv("HWK_FAKE_CLI_REPLIES"))
	if err != nil {
		return fail(dir, args, err.Error())
	}
	var vars map[string]string
	if err := readJSON(filepath.Join(dir, "vars.json"), &vars); err != nil {
		return fail(dir, args, err.Error())
	}
	var st transcript.State
	if err := readJSON(filepath.Join(dir, "state.json"), &st); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fail(dir, args, err.Error())
	}
	e, ok := t.Answer(&st, args, vars)
	if !ok {
		return fail(dir, args, "no exchange of the transcript expects this call (flags: "+strings.Join(st.Flags, " ")+")")
	}
	rep, err := e.Render(replies, &st, vars)
	if err != nil {
		return fail(dir, args, err.Error())
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(mustJSON(st)), 0o644); err != nil {
		return fail(dir, args, err.Error())
	}
	appendLine(filepath.Join(dir, "answers.log"), fmt.Sprintf("%s:%d %s", t.Name, e.Line, mustJSON(args)))
	write(os.Stdout, rep.Stdout, rep.UTF16)
	write(os.Stderr, rep.Stderr, rep.UTF16)
	return rep.Exit
}

// write writes s, as UTF-16LE without a byte order mark when utf16le
// says so (as wsl.exe writes its own messages).
func write(f *os.File, s string, utf16le bool) {
	if !utf16le {
		f.WriteString(s)
		return
	}
	u := utf16.Encode([]rune(s))
	b := make([]byte, 0, 2*len(u))
	for _, c := range u {
		b = append(b, byte(c), byte(c>>8))
	}
	f.Write(b)
}

// fail records a call the fake could not answer and answers it as the
// real program answers a failure.
func fail(dir string, args []string, why string) int {
	if dir != "" {
		appendLine(filepath.Join(dir, "unexpected.log"), fmt.Sprintf("%s: %s", mustJSON(args), why))
	}
	if wsl {
		write(os.Stdout, "fake wsl.exe: "+why+"\r\nError code: Wsl/E_UNEXPECTED\r\n", true)
		return -1
	}
	fmt.Fprintf(os.Stderr, "VBoxManage: error: fake VBoxManage: %s\n", why)
	return 1
}

// lock takes the fake's lock file: the calls of one test run one at a
// time even if the driver under test did not serialize them.
func lock(path string) (func(), error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func countLines(path string) int {
	data, _ := os.ReadFile(path)
	return strings.Count(string(data), "\n")
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}
