package hostexec

import (
	"testing"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/sys/windows"
)

// TestFromANSIWindows: a path written in the ANSI code page, as
// VBoxManage writes one under C:\Users\José to a pipe, comes back as
// UTF-8; exactly, where the code page is Windows-1252 (Wine's, and
// western Windows').
func TestFromANSIWindows(t *testing.T) {
	const path = `C:\Users\José\.hwk`
	// WideCharToMultiByte, which x/sys/windows does not wrap.
	proc := windows.NewLazySystemDLL("kernel32.dll").NewProc("WideCharToMultiByte")
	u := utf16.Encode([]rune(path))
	b := make([]byte, 4*len(u))
	n, _, err := proc.Call(cpACP, 0, uintptr(unsafe.Pointer(&u[0])), uintptr(len(u)), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0)
	if n == 0 {
		t.Fatalf("WideCharToMultiByte: %v", err)
	}
	ansi := b[:n]
	got := FromANSI(ansi)
	acp := windows.GetACP()
	t.Logf("ANSI code page %d: % x → %q", acp, ansi, got)
	if acp == 1252 && got != path {
		t.Errorf("FromANSI(% x) = %q, want %q", ansi, got, path)
	}
	if !utf8.ValidString(got) {
		t.Errorf("FromANSI(% x) = %q, not UTF-8", ansi, got)
	}
}
