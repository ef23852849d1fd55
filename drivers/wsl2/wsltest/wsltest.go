// Package wsltest puts a fake wsl.exe first on PATH for tests outside the
// driver that run its real process-spawning code (pkg/cluster's): it
// answers from a transcript and the real-format replies in
// drivers/wsl2/testdata (see drivers/internal/clitest), in UTF-16LE where
// wsl.exe writes it.
package wsltest

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hwk-dev/hwk/drivers/internal/clitest"
)

// Fake is the fake wsl.exe and its record.
type Fake = clitest.Fake

// New puts the fake wsl.exe first on PATH for the rest of t, answering
// from testdata/transcripts/TRANSCRIPT with vars for its ${VAR}s. It
// clears the variables that would tell the driver it runs inside WSL.
func New(t testing.TB, transcript string, vars map[string]string) *Fake {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	f := clitest.New(t, "wsl.exe", filepath.Join(filepath.Dir(self), "..", "testdata"), transcript, vars)
	t.Setenv("WSL_DISTRO_NAME", "")
	t.Setenv("WSL_INTEROP", "")
	return f
}
