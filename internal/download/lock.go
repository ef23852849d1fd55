package download

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hwk-dev/hwk/internal/state"
)

// lockPoll is how often a Fetch waiting for another's download of the
// same digest tries the lock. Tests shorten it.
var lockPoll = 200 * time.Millisecond

// lockDigest takes the lock on fetching want, waiting while another
// process (or goroutine: the lock is per open file) holds it. It is an
// operating system lock, not a file that exists, so a killed hwk leaves
// nothing that blocks the next.
func lockDigest(ctx context.Context, path string, want Checksum) (*state.Lock, error) {
	for {
		lock, err := state.AcquireLock(path, "the download of "+want.String())
		var locked *state.LockedError
		if !errors.As(err, &locked) {
			return lock, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting: %w: %w", err, context.Cause(ctx))
		case <-time.After(lockPoll):
		}
	}
}
