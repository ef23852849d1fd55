//go:build !windows

// Package console keeps the console programs drivers run (VBoxManage,
// wsl.exe) from opening a window of their own when hwk has none.
package console

import "os/exec"

// Hide does nothing: only Windows opens a window for a console program.
func Hide(*exec.Cmd) {}

// Detach does nothing: only Windows puts hwk's children in its job.
func Detach(*exec.Cmd) {}

// Refused is false: Detach refuses no start.
func Refused(error) bool { return false }
