package hostexec

import (
	"runtime"
	"testing"
)

// TestFromANSI: UTF-8 stays as it is, and elsewhere than on Windows so
// does every other byte.
func TestFromANSI(t *testing.T) {
	const path = `C:\Users\José\.hwk`
	if got := FromANSI([]byte(path)); got != path {
		t.Errorf("FromANSI(UTF-8) = %q, want %q", got, path)
	}
	if runtime.GOOS == "windows" {
		return
	}
	if got := FromANSI([]byte("Jos\xe9")); got != "Jos\xe9" {
		t.Errorf("FromANSI = %q, want the bytes as they are", got)
	}
}
