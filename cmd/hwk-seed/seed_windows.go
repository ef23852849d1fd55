package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/windows"

	"github.com/hwk-dev/hwk/internal/winseed"
)

// findSeed returns the root of the volume labelled cidata (D:\, E:\, ...).
func findSeed() (string, error) {
	mask, err := windows.GetLogicalDrives()
	if err != nil {
		return "", err
	}
	for i := 0; i < 26; i++ {
		if mask&(1<<i) == 0 {
			continue
		}
		root := string(rune('A'+i)) + `:\`
		label := make([]uint16, windows.MAX_PATH+1)
		p, _ := windows.UTF16PtrFromString(root)
		if windows.GetVolumeInformation(p, &label[0], uint32(len(label)), nil, nil, nil, nil, 0) != nil {
			continue // an empty drive, a disconnected share
		}
		if strings.EqualFold(windows.UTF16ToString(label), "cidata") {
			return root, nil
		}
	}
	return "", errors.New("no disk labelled cidata: this machine has no hwk seed (was it started by hwk?)")
}

// waitReady waits for Setup and the network adapter, writing to out why
// it waits.
func waitReady(out io.Writer) error {
	w := winseed.DefaultWait
	w.Log = out
	_, err := winseed.WaitReady(context.Background(), winseed.PowerShellProbe{}, w)
	return err
}

// runScript runs the script in Windows PowerShell, encoded so that no
// quoting layer touches it.
func runScript(script string, out, errOut io.Writer) error {
	return runEncoded("powershell.exe", script, out, errOut)
}

// logPath is where hwk-seed also writes what it prints: its scheduled task
// keeps no output, and the first real runs need to show why it waited.
const logPath = `C:\ProgramData\hwk\hwk-seed.log`

// withLog copies stdout and stderr to logPath, stamped with the time of each
// run; without the file hwk-seed goes on, unlogged.
func withLog(stdout, stderr io.Writer) (io.Writer, io.Writer, func()) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return stdout, stderr, func() {}
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return stdout, stderr, func() {}
	}
	fmt.Fprintf(f, "--- hwk-seed %s\n", time.Now().UTC().Format(time.RFC3339))
	return io.MultiWriter(stdout, f), io.MultiWriter(stderr, f), func() { f.Close() }
}
