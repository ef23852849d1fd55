package hyperv

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

// ownConsole makes cmd start in a console of its own, with no window
// (CREATE_NO_WINDOW), so that what it sets there and a Ctrl-C typed at
// hwk's stay apart; hwk ends the session itself.
func ownConsole(cmd *exec.Cmd) {
	// Why: what it sets includes the output code page
	// ([Console]::OutputEncoding calls SetConsoleOutputCP), which would
	// change the console hwk runs in for as long as that console lives
	// (CREATE_NO_WINDOW: Process Creation Flags, learn.microsoft.com).
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_NO_WINDOW}
}
