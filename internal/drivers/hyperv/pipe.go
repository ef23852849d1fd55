package hyperv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// pipeDenied is how many refused opens of a VM's COM1 pipe in a row make
// Install give up: the VM runs by then, so the pipe is there and hwk may
// not read it.
const pipeDenied = 10

// errNoPipes is what openNamedPipe returns off Windows, where Hyper-V has
// no VMs to follow.
var errNoPipes = errors.New("no named pipes here")

// followPipe copies what a VM writes to its COM1 pipe into file until
// stop is called, trying to open the pipe every d.pipePoll until it is
// there; the pipe ends when the VM stops. A pipe hwk is refused pipeDenied
// times in a row is an error on failed.
func (d *Driver) followPipe(ctx context.Context, pipe, file string) (stop func(), failed <-chan error) {
	// Why retried: Hyper-V creates the pipe when the VM starts. Why an
	// error: refused, the console, and with it the build's progress,
	// would stay dark until the build's time ran out.
	ctx, cancel := context.WithCancel(ctx)
	done, fail := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(done)
		out, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return
		}
		defer out.Close()
		denied := 0
		for ctx.Err() == nil {
			in, err := d.openPipe(pipe)
			if errors.Is(err, errNoPipes) {
				return
			}
			if err != nil {
				if errors.Is(err, fs.ErrPermission) {
					denied++
				} else {
					denied = 0
				}
				if denied >= pipeDenied {
					fail <- fmt.Errorf("read the VM's console: %w; Hyper-V lets only some users open it: %s", err, consoleFix)
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(d.pipePoll):
				}
				continue
			}
			denied = 0
			go func() { <-ctx.Done(); in.Close() }()
			_, _ = io.Copy(out, in)
			in.Close()
		}
	}()
	return func() { cancel(); <-done }, fail
}

// consoleFix is what to do when the VM's console pipe is refused.
const consoleFix = "run hwk from an elevated PowerShell (Run as administrator)"
