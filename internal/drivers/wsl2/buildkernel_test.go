package wsl2

import (
	"context"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/wsltest"
)

// TestKernelCheck checks that a build takes WSL as its kernel only from
// WSL 2.0 on.
func TestKernelCheck(t *testing.T) {
	fake := wsltest.New(t, "buildkernel-check.txt", nil)
	k := Kernel{Runner: CLI{}, Dir: t.TempDir()}
	for _, want := range []string{"", "predates WSL 2.0", "WSL 1.2.5.0 is too old"} {
		err := k.Check(context.Background())
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "wsl --update")) {
			t.Errorf("Check = %v, want %q", err, want)
		}
	}
	fake.Check(t)
}
