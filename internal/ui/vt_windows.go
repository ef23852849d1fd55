package ui

import (
	"os"

	"golang.org/x/sys/windows"
)

// drawsEscapes turns on the console's escape sequences, which the spinner
// uses to redraw its line: Windows Terminal has them on, the classic
// console host only when asked (ENABLE_VIRTUAL_TERMINAL_PROCESSING,
// Windows 10 1511 and later; learn.microsoft.com, "Console Virtual
// Terminal Sequences"). A console that refuses gets plain lines.
func drawsEscapes(f *os.File) bool {
	h := windows.Handle(f.Fd())
	var mode uint32
	if err := windows.GetConsoleMode(h, &mode); err != nil {
		return false
	}
	if mode&windows.ENABLE_VIRTUAL_TERMINAL_PROCESSING != 0 {
		return true
	}
	return windows.SetConsoleMode(h, mode|windows.ENABLE_VIRTUAL_TERMINAL_PROCESSING) == nil
}
