// Package hypervtest puts a fake powershell.exe first on PATH for tests
// that run the Hyper-V driver's real session code: the driver starts it,
// and it answers from rules and the real-format replies in
// drivers/hyperv/testdata (see drivers/hyperv/internal/fakepowershell).
package hypervtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// FakePowerShell is a fake powershell.exe on PATH and its record.
type FakePowerShell struct {
	// Dir holds its rules, state and logs.
	Dir string
}

func testdata() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "testdata")
}

// New builds the fake, puts it first on PATH for the rest of t, and
// gives it the rules in testdata/transcripts/RULES.
func New(t testing.TB, rules string) *FakePowerShell {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "powershell.exe"), "github.com/hwk-dev/hwk/drivers/hyperv/internal/fakepowershell")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the fake powershell.exe: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(testdata(), "transcripts", rules))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("HWK_FAKE_POWERSHELL_DIR", dir)
	t.Setenv("HWK_FAKE_POWERSHELL_REPLIES", filepath.Join(testdata(), "replies"))
	return &FakePowerShell{Dir: dir}
}

func (f *FakePowerShell) lines(name string) []string {
	data, err := os.ReadFile(filepath.Join(f.Dir, name))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(data), "\n"), "\n")
}

// Starts is the arguments of every start of the fake so far, one line
// each.
func (f *FakePowerShell) Starts() []string { return f.lines("starts.log") }

// Scripts is the log of every script it answered, each headed by the
// rule that answered it.
func (f *FakePowerShell) Scripts() string {
	data, _ := os.ReadFile(filepath.Join(f.Dir, "scripts.log"))
	return string(data)
}

// Unexpected is what it did not expect: scripts no rule matched, lines
// outside the protocol, other arguments.
func (f *FakePowerShell) Unexpected() string {
	data, _ := os.ReadFile(filepath.Join(f.Dir, "unexpected.log"))
	return string(data)
}

// Check fails t for everything the fake did not expect.
func (f *FakePowerShell) Check(t testing.TB) {
	t.Helper()
	if u := f.Unexpected(); u != "" {
		t.Errorf("the fake powershell.exe was sent what it did not expect:\n%s", u)
	}
}
