// Package clitest puts a fake program first on PATH for tests that run a
// driver's real process-spawning code: the driver finds and starts it as
// it would the real one (VBoxManage, wsl.exe), and it answers from a
// transcript and the real-format replies in the driver's testdata (see
// drivers/internal/transcript and drivers/internal/fakecli).
package clitest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers/internal/transcript"
)

// Fake is a fake program on PATH and its record.
type Fake struct {
	// Dir holds its transcript, state and logs.
	Dir        string
	transcript string
}

// New builds the fake as program (its file name, "VBoxManage" or
// "wsl.exe") into a directory of t's, puts that first on PATH for the rest
// of t, and has it answer from testdata/transcripts/TRANSCRIPT with the
// replies in testdata/replies, vars filling the transcript's ${VAR}s.
func New(t testing.TB, program, testdata, name string, vars map[string]string) *Fake {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	cmd := exec.Command("go", "build", "-o", filepath.Join(bin, program), "github.com/hwk-dev/hwk/drivers/internal/fakecli")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the fake %s: %v\n%s", program, err, out)
	}
	data, err := os.ReadFile(filepath.Join(testdata, "transcripts", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := transcript.Parse(name, data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "transcript.txt"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	v, _ := json.Marshal(vars)
	if err := os.WriteFile(filepath.Join(dir, "vars.json"), v, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("HWK_FAKE_CLI_DIR", dir)
	t.Setenv("HWK_FAKE_CLI_TRANSCRIPT", name)
	t.Setenv("HWK_FAKE_CLI_REPLIES", filepath.Join(testdata, "replies"))
	return &Fake{Dir: dir, transcript: name}
}

// Calls is the argv of every call so far.
func (f *Fake) Calls() [][]string {
	data, _ := os.ReadFile(filepath.Join(f.Dir, "calls.log"))
	var out [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var args []string
		if json.Unmarshal([]byte(line), &args) == nil {
			out = append(out, args)
		}
	}
	return out
}

// Input is what call number i (counting from 0, as in Calls) read on its
// stdin; nil when it read nothing.
func (f *Fake) Input(i int) []byte {
	data, _ := os.ReadFile(filepath.Join(f.Dir, "stdin."+strconv.Itoa(i)))
	return data
}

// Unexpected is what it did not expect, a line per call.
func (f *Fake) Unexpected() string {
	data, _ := os.ReadFile(filepath.Join(f.Dir, "unexpected.log"))
	return string(data)
}

// Unused lists the transcript's exchanges that never answered.
func (f *Fake) Unused() []string {
	data, err := os.ReadFile(filepath.Join(f.Dir, "transcript.txt"))
	if err != nil {
		return []string{err.Error()}
	}
	t, err := transcript.Parse(f.transcript, data)
	if err != nil {
		return []string{err.Error()}
	}
	var st transcript.State
	if raw, err := os.ReadFile(filepath.Join(f.Dir, "state.json")); err == nil {
		_ = json.Unmarshal(raw, &st)
	}
	return t.Unused(&st)
}

// Check fails t for every call the fake did not expect and every
// exchange of the transcript no call used.
func (f *Fake) Check(t testing.TB) {
	t.Helper()
	if u := f.Unexpected(); u != "" {
		t.Errorf("the fake program was called in ways its transcript does not expect:\n%s", u)
	}
	if u := f.Unused(); len(u) > 0 {
		t.Errorf("exchanges of the transcript no call used:\n  %s", strings.Join(u, "\n  "))
	}
}

// Seeds is every reply in testdata's replies directory whose key starts
// with prefix, in key order: the seeds of a fuzz target. None is a
// failure, so that a renamed reply does not leave a target unseeded.
func Seeds(t testing.TB, testdata, prefix string) []transcript.Reply {
	t.Helper()
	all, err := transcript.LoadReplies(filepath.Join(testdata, "replies"))
	if err != nil {
		t.Fatal(err)
	}
	replies := all.WithPrefix(prefix)
	if len(replies) == 0 {
		t.Fatalf("no replies %s*", prefix)
	}
	return replies
}
