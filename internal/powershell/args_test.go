package powershell

import (
	"slices"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	// Beyond the BMP too: UTF-16 needs a surrogate pair for the clef.
	script := "Write-Output 'héllo ✓ 𝄞'\r\n$x = \"a`\"b\"\n"
	args := Args(script)
	if !slices.Equal(args[:6], []string{"-NoLogo", "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-EncodedCommand"}) {
		t.Errorf("args %q", args)
	}
	if got, ok := Script(args); !ok || got != script {
		t.Errorf("Script(Args(s)) = %q, %v", got, ok)
	}
	for _, bad := range [][]string{nil, {"-Command", "x"}, {"-EncodedCommand", "not base64!"}, {"-EncodedCommand", "YQ=="}} {
		if got, ok := Script(bad); ok {
			t.Errorf("Script(%q) = %q, took it", bad, got)
		}
	}
}
