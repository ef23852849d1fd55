//go:build !windows

package main

import (
	"errors"
	"io"
)

// findSeed fails off Windows: hwk-seed changes a Windows machine, and
// elsewhere it can only show what it would run (--print) for a seed
// directory given with --seed.
func findSeed() (string, error) {
	return "", permanent{errors.New("no --seed directory given (only on Windows does hwk-seed look for the cidata disk itself)")}
}

func waitReady(io.Writer) error {
	return permanent{errors.New("hwk-seed applies a seed only on Windows; --print shows the PowerShell it would run")}
}

func runScript(string, io.Writer, io.Writer) error {
	return permanent{errors.New("hwk-seed applies a seed only on Windows; --print shows the PowerShell it would run")}
}

// withLog returns stdout and stderr as they are: only on Windows does
// hwk-seed keep a log of its runs.
func withLog(stdout, stderr io.Writer) (io.Writer, io.Writer, func()) {
	return stdout, stderr, func() {}
}
