// Package console keeps the console programs drivers run (VBoxManage,
// wsl.exe) from opening a window of their own when hwk has none.
package console

import (
	"errors"
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

// Hide has cmd start without a console window.
func Hide(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{HideWindow: true, CreationFlags: windows.CREATE_NO_WINDOW}
}

// Detach has cmd start outside the job object hwk may run in
// (CREATE_BREAKAWAY_FROM_JOB), so that a program meant to outlive hwk is
// not ended with a job that kills its processes on close, as an SSH
// session's or a CI runner's may. Call it after Hide; a job that allows
// no breakaway refuses the start (Refused).
func Detach(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_BREAKAWAY_FROM_JOB
}

// Refused reports whether err is a start that Detach's breakaway made
// fail: CreateProcess gives ERROR_ACCESS_DENIED in a job without
// JOB_OBJECT_LIMIT_BREAKAWAY_OK.
func Refused(err error) bool { return errors.Is(err, windows.ERROR_ACCESS_DENIED) }
