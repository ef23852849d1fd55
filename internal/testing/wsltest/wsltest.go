// Package wsltest puts a fake wsl.exe first on PATH for tests that run
// the WSL2 driver's real process-spawning code (the driver's own and
// pkg/cluster's): it answers from a transcript and the real-format
// replies in internal/drivers/wsl2/testdata (see internal/testing/fakeprog), in
// UTF-16LE where wsl.exe writes it.
package wsltest

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/fakeprog"
)

// Fake is the fake wsl.exe and its record.
type Fake = fakeprog.Fake

// Testdata is internal/drivers/wsl2/testdata.
func Testdata() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "drivers", "wsl2", "testdata")
}

// New puts the fake wsl.exe first on PATH for the rest of t, answering
// from testdata/transcripts/TRANSCRIPT with vars for its ${VAR}s. It
// clears the variables that would tell the driver it runs inside WSL.
func New(t testing.TB, transcript string, vars map[string]string) *Fake {
	t.Helper()
	tr, err := fakeprog.ParseFile(filepath.Join(Testdata(), "transcripts", transcript))
	if err != nil {
		t.Fatal(err)
	}
	f := fakeprog.New(t, fakeprog.Config{
		Program: "wsl.exe", Transcript: tr, Replies: filepath.Join(Testdata(), "replies"), Vars: vars,
		// As wsl.exe fails: its message on stdout in UTF-16LE, exit
		// status -1.
		Refusal: fakeprog.Reply{Stdout: "fake wsl.exe: {why}\r\nError code: Wsl/E_UNEXPECTED\r\n", UTF16: true, Exit: -1},
	})
	t.Setenv("WSL_DISTRO_NAME", "")
	t.Setenv("WSL_INTEROP", "")
	return f
}
