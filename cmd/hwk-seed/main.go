// Command hwk-seed is the first-boot program of hwk's Windows node image.
// At every boot (a scheduled task, as SYSTEM) it finds the node's cidata
// seed disk, and the first time it sees a seed it gives the machine the
// node's static address, DNS, the cluster's SSH key for Administrator, the
// SSH host key hwk pinned for it, and its name (then restarts once). It
// first waits for Windows Setup to finish with the machine and for its
// network adapter (winseed.WaitReady). What it then does is pkg/winseed's
// script; --print shows it without running it, on any OS.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hwk-dev/hwk/pkg/winseed"
)

func main() {
	stdout, stderr, closeLog := withLog(os.Stdout, os.Stderr)
	code := run(os.Args[1:], stdout, stderr)
	closeLog()
	os.Exit(code)
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hwk-seed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("seed", "", "the seed's directory (default: the disk labelled cidata; Windows only)")
	printOnly := fs.Bool("print", false, "print the PowerShell that applies the seed instead of running it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := apply(*dir, *printOnly, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "hwk-seed: %v\n", err)
		return 1
	}
	return 0
}

func apply(dir string, print bool, stdout, stderr io.Writer) error {
	if dir == "" {
		var err error
		if dir, err = findSeed(); err != nil {
			return err
		}
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("seed %s: %w", dir, err)
	}
	if !st.IsDir() {
		return errors.New("seed " + dir + ": not a directory")
	}
	s, err := winseed.Read(os.DirFS(dir))
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	script := s.Script(dir)
	if print {
		_, err := io.WriteString(stdout, script)
		return err
	}
	// Every boot runs hwk-seed; only a seed not yet applied waits for
	// Setup and the network (the script checks the marker again).
	if b, err := os.ReadFile(winseed.Marker); err == nil && strings.TrimSpace(string(b)) == s.ID {
		_, err := fmt.Fprintf(stdout, "hwk-seed: seed %s is applied already\n", s.ID)
		return err
	}
	if err := waitReady(stdout); err != nil {
		return err
	}
	return runScript(script, stdout, stderr)
}
