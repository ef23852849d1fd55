//go:build !windows

package ui

import "os"

// drawsEscapes reports whether the terminal draws escape sequences: here
// it always does.
func drawsEscapes(*os.File) bool { return true }
