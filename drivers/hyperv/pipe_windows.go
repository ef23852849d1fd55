//go:build windows

package hyperv

import (
	"context"
	"io"
	"os"
	"time"
)

// followPipe copies what a VM writes to its COM1 pipe into file until
// the returned func is called. Hyper-V creates the pipe when the VM
// starts, so opening it is retried; the pipe ends when the VM stops.
func followPipe(ctx context.Context, pipe, file string) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return
		}
		defer out.Close()
		for ctx.Err() == nil {
			in, err := os.OpenFile(pipe, os.O_RDONLY, 0)
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(500 * time.Millisecond):
				}
				continue
			}
			go func() { <-ctx.Done(); in.Close() }()
			_, _ = io.Copy(out, in)
			in.Close()
		}
	}()
	return func() { cancel(); <-done }
}
