// Command fakeprog is the fake program of hwk's tests: built once per
// test process and placed first on PATH under the name of the program it
// stands in for (powershell.exe, VBoxManage, wsl.exe) by
// internal/testing/fakeprog, it answers from a transcript and real-format
// replies and records every request, and everything it did not expect,
// for the test to fail on.
package main

import (
	"os"
	"strings"

	"github.com/hwk-dev/hwk/internal/drivers/hyperv"
	"github.com/hwk-dev/hwk/internal/testing/fakeprog"
)

func main() {
	os.Exit(fakeprog.Main(os.Args[1:], unwrap))
}

// unwrap is the script a Hyper-V session request wraps, if it is exactly
// hyperv.Wrap's.
func unwrap(wrapped string) (string, bool) {
	const open, end = "$hwkOut = & {\n", "\n    }\n    '<<hwk-result>>'"
	i := strings.Index(wrapped, open)
	j := strings.Index(wrapped, end)
	if i < 0 || j < i {
		return "", false
	}
	script := wrapped[i+len(open) : j]
	return script, hyperv.Wrap(script) == wrapped
}
