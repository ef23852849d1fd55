//go:build !windows

package ui

import "os"

// drawsEscapes: a terminal here draws escape sequences.
func drawsEscapes(*os.File) bool { return true }
