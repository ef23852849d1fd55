//go:build !windows

package state

import "os"

// replace renames from over to: rename(2) replaces to atomically, whoever
// has it open.
func replace(from, to string) error { return os.Rename(from, to) }
