package state

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/windows"
)

// replaceWait bounds how long replace waits for another process to close
// the file it replaces.
const replaceWait = 2 * time.Second

// replace renames from over to, trying again for up to replaceWait while
// another process has to open (ERROR_ACCESS_DENIED or
// ERROR_SHARING_VIOLATION).
func replace(from, to string) error {
	// Why: os.Rename is MoveFileEx with MOVEFILE_REPLACE_EXISTING, which
	// fails with those errors while kubectl reads the kubeconfig, or an
	// antivirus scanner or the search indexer looks at a file just
	// written. Such an open is brief, so the Go command tries again for
	// the same errors (Go's cmd/internal/robustio, golang.org/issue/31247
	// and golang.org/issue/32188).
	deadline := time.Now().Add(replaceWait)
	pause := time.Millisecond
	for {
		err := os.Rename(from, to)
		if err == nil || !(errors.Is(err, windows.ERROR_ACCESS_DENIED) || errors.Is(err, windows.ERROR_SHARING_VIOLATION)) || time.Now().Add(pause).After(deadline) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}
