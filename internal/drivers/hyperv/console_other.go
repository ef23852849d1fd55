//go:build !windows

package hyperv

import "os/exec"

// ownConsole does nothing: only Windows has consoles to keep apart.
func ownConsole(*exec.Cmd) {}
