// Package console keeps the console programs drivers run (VBoxManage,
// wsl.exe) from opening a window of their own when hwk has none.
package console

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

// Hide has cmd start without a console window.
func Hide(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{HideWindow: true, CreationFlags: windows.CREATE_NO_WINDOW}
}
