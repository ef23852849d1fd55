package wsl2

import (
	"context"
	"fmt"
	"io"

	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/pkg/node"
)

// transport runs commands in a distribution as root, through `wsl.exe -d
// NAME -u root -e ARGS...`: -e runs the program itself, as the other
// transports do, where -- would hand the line to the user's shell. The
// command's output arrives as it wrote it and its exit status is
// wsl.exe's (WslClient.cpp, LaunchProcess).
type transport struct {
	r      Runner
	distro string
}

var _ node.Transport = transport{}

// wslFailed reports whether exit is wsl.exe's own failure, -1
// (0xFFFFFFFF as Windows reports it to Go), rather than the command's.
func wslFailed(exit int) bool { return exit == -1 || exit == 0xFFFFFFFF }

// Run implements node.Transport.
func (t transport) Run(ctx context.Context, cmd node.Cmd) error {
	args := append([]string{"-d", t.distro, "-u", "root", "-e"}, cmd.Args...)
	stdout, stderr := cmd.Stdout, cmd.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	// wsl.exe writes its own failure to stdout; the end of stdout is kept
	// to tell it from the command's.
	tail := hostexec.NewTail(4096)
	exit, err := t.r.Run(ctx, cmd.Stdin, io.MultiWriter(stdout, tail), stderr, args...)
	switch {
	case err != nil:
		return fmt.Errorf("wsl.exe -d %s: %w", t.distro, err)
	case wslFailed(exit):
		return parseError(args[:2], decode(tail.Bytes()), exit)
	case exit != 0:
		return &node.ExitError{Code: exit}
	}
	return nil
}
