// Package fakeprog is the one fake-program framework of hwk's tests: a
// fake of each Windows or VM tool hwk drives (powershell.exe, VBoxManage,
// wsl.exe) that the code under test finds on PATH and starts as it would
// the real one. The fake answers from a transcript (Parse: which request
// gets which answer, with flags for state) and replies in the real tool's
// own output format (LoadReplies: files that cite where each format comes
// from), in the tool's encoding, with its exit status and stderr; it
// records every request, and fails the test (Check) on a request no
// exchange expects and on an exchange no request used.
//
// One program (cmd/fakeprog, Main) speaks both ways a tool is driven:
// Calls, one request per process (its arguments), and PowerShellSession,
// a long-running process that reads requests from stdin (the Hyper-V
// driver's PowerShell session). New builds it once per test process and
// puts it first on PATH under the tool's name.
package fakeprog

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// binary builds the fake program once per test process, into a
// directory of its own under the user's cache (hwk-test/fakeprog, 0700:
// not a shared /tmp, where another user could own or swap the folder). A
// test process cannot remove its build as it exits, so each build
// removes those over a day old (the fakes already on PATH are links of
// their own).
var binary = sync.OnceValues(func() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	root := filepath.Join(cache, "hwk-test", "fakeprog")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	if old, err := os.ReadDir(root); err == nil {
		for _, e := range old {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 24*time.Hour {
				_ = os.RemoveAll(filepath.Join(root, e.Name()))
			}
		}
	}
	dir, err := os.MkdirTemp(root, "build-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, installName("fakeprog"))
	out, err := exec.Command("go", "build", "-o", bin, "github.com/hwk-dev/hwk/internal/testing/fakeprog/cmd/fakeprog").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build the fake program: %v\n%s", err, out)
	}
	return bin, nil
})

// Fake is a fake program on PATH and its record.
type Fake struct {
	// Dir holds its config, state and record.
	Dir string
	cfg Config
}

// New puts the fake program first on PATH for the rest of t, as
// cfg.Program, answering as cfg says.
func New(t testing.TB, cfg Config) *Fake {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "bin")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := install(bin, filepath.Join(path, installName(cfg.Program))); err != nil {
		t.Fatal(err)
	}
	if cfg.Protocol == "" {
		cfg.Protocol = Calls
	}
	if cfg.Transcript == nil {
		cfg.Transcript = &Transcript{Name: "empty"}
	}
	if cfg.Replies != "" {
		// The program may run in another directory than the test's.
		if cfg.Replies, err = filepath.Abs(cfg.Replies); err != nil {
			t.Fatal(err)
		}
	}
	f := &Fake{Dir: dir, cfg: cfg}
	f.Write(t)
	t.Setenv("PATH", path+string(os.PathListSeparator)+os.Getenv("PATH"))
	return f
}

// installName is the file name the fake is installed as: on Windows a
// name with no extension gets ".exe", as the real tool's file has (a
// test asks for "VBoxManage", the file is VBoxManage.exe). There
// os/exec's LookPath, like cmd.exe, finds "NAME" only as NAME plus an
// extension PATHEXT lists (os/exec/lp_windows.go), so a file with none
// on PATH is never started.
func installName(program string) string {
	if runtime.GOOS == "windows" && filepath.Ext(program) == "" {
		return program + ".exe"
	}
	return program
}

// install links the built program to path, or copies it where it cannot.
func install(bin, path string) error {
	if os.Link(bin, path) == nil {
		return nil
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o755)
}

// Transcript is the fake's transcript, which a test may change before
// calling Write.
func (f *Fake) Transcript() *Transcript { return f.cfg.Transcript }

// Write hands the fake its config again (after a change to the
// transcript).
func (f *Fake) Write(t testing.TB) {
	t.Helper()
	b, err := json.Marshal(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.Dir, configFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *Fake) read(name string) string {
	data, _ := os.ReadFile(filepath.Join(f.Dir, name))
	return string(data)
}

func lines(s string) []string {
	if s = strings.TrimRight(s, "\n"); s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Calls is the arguments of every start of the program so far.
func (f *Fake) Calls() [][]string {
	var out [][]string
	for _, line := range lines(f.read(callsFile)) {
		var args []string
		if json.Unmarshal([]byte(line), &args) == nil {
			out = append(out, args)
		}
	}
	return out
}

// Starts is the arguments of every start, joined with spaces.
func (f *Fake) Starts() []string {
	var out []string
	for _, c := range f.Calls() {
		out = append(out, strings.Join(c, " "))
	}
	return out
}

// Input is what call number i (counting from 0, as in Calls) read on its
// stdin; nil when it read nothing.
func (f *Fake) Input(i int) []byte {
	data, _ := os.ReadFile(filepath.Join(f.Dir, "stdin."+strconv.Itoa(i)))
	return data
}

// Requests is the log of every request, each headed "# --- " and the
// exchange that answered it.
func (f *Fake) Requests() string { return f.read(requestsFile) }

// Answered is the name of the exchange that answered each request.
func (f *Fake) Answered() []string { return lines(f.read(answersFile)) }

// Unexpected is what the fake did not expect: requests no exchange
// matched, lines outside its protocol, other arguments.
func (f *Fake) Unexpected() string { return f.read(unexpectedFile) }

// Unused lists the transcript's exchanges that never answered but
// should have.
func (f *Fake) Unused() []string {
	var st State
	if raw, err := os.ReadFile(filepath.Join(f.Dir, stateFile)); err == nil {
		_ = json.Unmarshal(raw, &st)
	}
	return f.cfg.Transcript.Unused(&st)
}

// Check fails t for every request the fake did not expect and every
// exchange of the transcript no request used.
func (f *Fake) Check(t testing.TB) {
	t.Helper()
	if u := f.Unexpected(); u != "" {
		t.Errorf("the fake %s was asked what its transcript does not expect:\n%s", f.cfg.Program, u)
	}
	if u := f.Unused(); len(u) > 0 {
		t.Errorf("exchanges of the transcript no request used:\n  %s", strings.Join(u, "\n  "))
	}
}

// Seeds is every reply in dir whose key starts with prefix, in key
// order: the seeds of a fuzz target. None is a failure, so that a renamed
// reply does not leave a target unseeded.
func Seeds(t testing.TB, dir, prefix string) []Reply {
	t.Helper()
	all, err := LoadReplies(dir)
	if err != nil {
		t.Fatal(err)
	}
	replies := all.WithPrefix(prefix)
	if len(replies) == 0 {
		t.Fatalf("no replies %s*", prefix)
	}
	return replies
}
