package hostexec_test

import (
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/windows"

	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/internal/testing/fakeprog"
)

// TestFromANSIWindows: a path written in the ANSI code page, as
// VBoxManage writes one under C:\Users\José to a pipe, comes back as
// UTF-8; exactly, where the code page is Windows-1252 (Wine's, and
// western Windows').
func TestFromANSIWindows(t *testing.T) {
	const path = `C:\Users\José\.hwk`
	ansi := fakeprog.ToANSI(path)
	got := hostexec.FromANSI(ansi)
	acp := windows.GetACP()
	t.Logf("ANSI code page %d: % x → %q", acp, ansi, got)
	if acp == 1252 && got != path {
		t.Errorf("FromANSI(% x) = %q, want %q", ansi, got, path)
	}
	if !utf8.ValidString(got) {
		t.Errorf("FromANSI(% x) = %q, not UTF-8", ansi, got)
	}
}
