package docker

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/pkg/node"
)

// execTransport runs commands in a node container with docker exec.
type execTransport struct {
	d  *Driver
	c  *client.Client
	id string
}

// Run implements node.Transport.
func (t *execTransport) Run(ctx context.Context, cmd node.Cmd) error {
	opts := client.ExecCreateOptions{
		Cmd:          cmd.Args,
		AttachStdin:  cmd.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	}
	if cmd.TTY != nil {
		opts.TTY = true
		opts.ConsoleSize = client.ConsoleSize{Height: uint(cmd.TTY.Rows), Width: uint(cmd.TTY.Cols)}
		// Terminal programs look for TERM; docker exec sets none.
		opts.Env = []string{"TERM=xterm-256color"}
	}
	ex, err := t.c.ExecCreate(ctx, t.id, opts)
	if err != nil {
		return t.d.wrap(t.c, fmt.Errorf("docker exec: %w", err))
	}
	att, err := t.c.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: opts.TTY, ConsoleSize: opts.ConsoleSize})
	if err != nil {
		return t.d.wrap(t.c, fmt.Errorf("docker exec: attach: %w", err))
	}
	defer att.Close()
	if cmd.TTY != nil {
		// Engines before API 1.42 ignore the size given at create; set it
		// now, as docker exec -t does. A failure leaves a terminal of the
		// engine's default size, which is no reason to fail the command.
		_, _ = t.c.ExecResize(ctx, ex.ID, client.ExecResizeOptions{Height: opts.ConsoleSize.Height, Width: opts.ConsoleSize.Width})
	}

	if cmd.Stdin != nil {
		go func() {
			// Errors here surface elsewhere: a failed read through the
			// node handle's input check, a closed connection as the
			// command's own exit.
			_, _ = io.Copy(att.Conn, cmd.Stdin)
			// Half-close: the command sees EOF and can finish while we
			// still read its output.
			_ = att.CloseWrite()
		}()
	}
	out := make(chan error, 1)
	go func() {
		var err error
		if cmd.TTY != nil {
			// A terminal is one raw stream, not docker's multiplexed one.
			_, err = io.Copy(cmd.Stdout, att.Reader)
		} else {
			_, err = stdcopy.StdCopy(cmd.Stdout, cmd.Stderr, att.Reader)
		}
		out <- err
	}()
	select {
	case err = <-out:
	case <-ctx.Done():
		// Closing the connection does not stop the process in the node;
		// the caller's context ending means it no longer cares for it.
		att.Close()
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("docker exec: read output: %w", err)
	}
	code, err := waitExit(ctx, t.c, ex.ID)
	if err != nil {
		return t.d.wrap(t.c, fmt.Errorf("docker exec: %w", err))
	}
	if code != 0 {
		return &node.ExitError{Code: code}
	}
	return nil
}

// waitExit polls until the exec'd process is gone; the stream can end a
// moment before the engine records the exit code.
func waitExit(ctx context.Context, c *client.Client, execID string) (int, error) {
	for {
		r, err := c.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return 0, err
		}
		if !r.Running {
			return r.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
