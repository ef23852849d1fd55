// Command hwk-seed is the first-boot program of hwk's Windows node image.
// At every boot (a scheduled task, as SYSTEM) it finds the node's cidata
// seed disk, and the first time it sees a seed it gives the machine the
// node's static address, DNS, the cluster's SSH key for Administrator, the
// SSH host key hwk pinned for it, and its name (then restarts once). It
// first waits for Windows Setup to finish with the machine and for its
// network adapter (winseed.WaitReady). What it then does is internal/winseed's
// script; --print shows it without running it, on any OS.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/internal/winseed"
)

func main() {
	stdout, stderr, closeLog := withLog(os.Stdout, os.Stderr)
	code := run(os.Args[1:], stdout, stderr)
	closeLog()
	os.Exit(code)
}

func run(args []string, stdout, stderr io.Writer) int {
	return runWith(args, platform, stdout, stderr)
}

// steps are what applying a seed does on this OS; tests give their own.
type steps struct {
	findSeed  func() (string, error)
	waitReady func(io.Writer) error
	runScript func(script string, out, errOut io.Writer) error
	sleep     func(time.Duration)
	// retryFor bounds the retries: a seed disk that is not there yet, an
	// adapter that is not up, a script that failed. Task Scheduler runs
	// hwk-seed once per boot and does not run it again when it exits
	// non-zero (RestartCount covers only a task that failed to start:
	// MS-TSCH 2.5.4.2), so hwk-seed itself tries again.
	retryFor time.Duration
}

var platform = steps{findSeed: findSeed, waitReady: waitReady, runScript: runScript, sleep: time.Sleep, retryFor: 30 * time.Minute}

func runWith(args []string, st steps, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hwk-seed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("seed", "", "the seed's directory (default: the disk labelled cidata; Windows only)")
	printOnly := fs.Bool("print", false, "print the PowerShell that applies the seed instead of running it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *printOnly {
		st.retryFor = 0
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := apply(*dir, *printOnly, st, stdout, stderr)
		if err == nil {
			return 0
		}
		var p permanent
		waited := time.Since(start)
		if errors.As(err, &p) || waited >= st.retryFor {
			fmt.Fprintf(stderr, "hwk-seed: %v\n", err)
			if attempt > 1 {
				fmt.Fprintf(stderr, "hwk-seed: giving up after %d attempts in %s\n", attempt, waited.Round(time.Second))
			}
			return 1
		}
		pause := min(time.Duration(attempt)*10*time.Second, time.Minute)
		fmt.Fprintf(stderr, "hwk-seed: attempt %d failed: %v; trying again in %s\n", attempt, err, pause)
		st.sleep(pause)
	}
}

// permanent is an error no retry mends: a seed that is wrong, an OS
// hwk-seed does not apply seeds on.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

func apply(dir string, print bool, st steps, stdout, stderr io.Writer) error {
	if dir == "" {
		var err error
		if dir, err = st.findSeed(); err != nil {
			return err
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("seed %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return permanent{errors.New("seed " + dir + ": not a directory")}
	}
	s, err := winseed.Read(os.DirFS(dir))
	if err != nil {
		return permanent{fmt.Errorf("%s: %w", dir, err)}
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
	if err := st.waitReady(stdout); err != nil {
		return err
	}
	return st.runScript(script, stdout, stderr)
}
