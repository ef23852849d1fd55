// Command fakevboxmanage is a fake VBoxManage for the VirtualBox driver's
// tests: the driver starts it as it would start VirtualBox's, and it
// answers each call from a transcript (see vboxscript), keeping what it
// has done in HWK_FAKE_VBOX_DIR between calls. A call the transcript does
// not expect is recorded there for the test to fail on, and answered as
// VBoxManage answers a failure, with exit status 1.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/drivers/virtualbox/internal/vboxscript"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	dir := os.Getenv("HWK_FAKE_VBOX_DIR")
	if dir == "" {
		fmt.Fprintln(os.Stderr, "VBoxManage: error: the fake VBoxManage needs HWK_FAKE_VBOX_DIR")
		return 1
	}
	unlock, err := lock(filepath.Join(dir, "lock"))
	if err != nil {
		return fail(dir, args, err.Error())
	}
	defer unlock()
	appendLine(filepath.Join(dir, "calls.log"), mustJSON(args))

	data, err := os.ReadFile(filepath.Join(dir, "transcript.txt"))
	if err != nil {
		return fail(dir, args, err.Error())
	}
	t, err := vboxscript.Parse(os.Getenv("HWK_FAKE_VBOX_TRANSCRIPT"), data)
	if err != nil {
		return fail(dir, args, err.Error())
	}
	replies, err := vboxscript.LoadReplies(os.Getenv("HWK_FAKE_VBOX_REPLIES"))
	if err != nil {
		return fail(dir, args, err.Error())
	}
	var vars map[string]string
	if err := readJSON(filepath.Join(dir, "vars.json"), &vars); err != nil {
		return fail(dir, args, err.Error())
	}
	var st vboxscript.State
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
	os.Stdout.WriteString(rep.Stdout)
	os.Stderr.WriteString(rep.Stderr)
	return rep.Exit
}

// fail records a call the fake could not answer and answers it as
// VBoxManage answers a failure.
func fail(dir string, args []string, why string) int {
	appendLine(filepath.Join(dir, "unexpected.log"), fmt.Sprintf("%s: %s", mustJSON(args), why))
	fmt.Fprintf(os.Stderr, "VBoxManage: error: fake VBoxManage: %s\n", why)
	return 1
}

// lock takes the fake's lock file: calls of one test run one at a time
// even if the driver under test did not serialize them.
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

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}
