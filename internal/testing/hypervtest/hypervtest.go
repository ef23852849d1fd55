// Package hypervtest puts a fake powershell.exe first on PATH for tests
// that run the Hyper-V driver's real session code: the driver starts it,
// and it answers the session from a transcript and the real-format
// replies in internal/drivers/hyperv/testdata (see internal/testing/fakeprog).
package hypervtest

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/fakeprog"
)

// FakePowerShell is a fake powershell.exe on PATH and its record.
type FakePowerShell = fakeprog.Fake

func testdata() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "drivers", "hyperv", "testdata")
}

// New puts the fake first on PATH for the rest of t, answering the
// session from testdata/transcripts/TRANSCRIPT.
func New(t testing.TB, transcript string) *FakePowerShell {
	t.Helper()
	tr, err := fakeprog.ParseFile(filepath.Join(testdata(), "transcripts", transcript))
	if err != nil {
		t.Fatal(err)
	}
	return fakeprog.New(t, fakeprog.Config{
		Program:    "powershell.exe",
		Protocol:   fakeprog.PowerShellSession,
		Transcript: tr,
		Replies:    filepath.Join(testdata(), "replies"),
	})
}

// NewSilent puts first on PATH a powershell.exe that reads the session's
// stdin to its end and answers nothing, as Wine's does.
func NewSilent(t testing.TB) *FakePowerShell {
	t.Helper()
	return fakeprog.New(t, fakeprog.Config{
		Program:  "powershell.exe",
		Protocol: fakeprog.PowerShellSession,
		Silent:   true,
	})
}
