package wsl2

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Kernel runs a node image's second stage (pkg/nodeimage.Kernel) in a
// throwaway WSL 2 distribution, on a Windows host with no Docker engine:
// the stage-1 root is imported from standard input, the script runs in it
// as root, and the distribution is exported to standard output and
// unregistered. wsl.exe --help: "--import <Distro> <InstallLocation>
// <FileName> ... The filename can be - for standard input", and for
// --export "The filename can be - for standard output".
//
// Unlike a Docker container, a WSL distribution shares the VM's network,
// so stage 2 is offline only because it asks for nothing.
type Kernel struct {
	Runner Runner
	// Dir holds the distributions' disks while they exist (hwk's cache).
	Dir string
}

// Name implements pkg/nodeimage.Kernel.
func (Kernel) Name() string { return "WSL 2" }

// Configure implements pkg/nodeimage.Kernel.
func (k Kernel) Configure(ctx context.Context, kind string, root io.Reader, log, out io.Writer) (err error) {
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "hwk-build-" + kind + "-" + hex.EncodeToString(suffix)
	dir := filepath.Join(k.Dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	cleanup := context.WithoutCancel(ctx)
	defer func() {
		// Unregistering deletes the distribution's disk; the directory
		// goes with it either way.
		if _, uerr := manage(cleanup, k.Runner, "--unregister", name); uerr != nil && !isCode(uerr, "WSL_E_DISTRO_NOT_FOUND") {
			err = errors.Join(err, fmt.Errorf("unregister the build distribution %s: %w", name, uerr))
		}
		err = errors.Join(err, os.RemoveAll(dir))
	}()

	if err := k.run(ctx, root, io.Discard, "--import", name, dir, "-", "--version", "2"); err != nil {
		return fmt.Errorf("import the stage-1 root as WSL distribution %s: %w", name, err)
	}
	tail := &tailBuffer{max: 4096}
	args := []string{"-d", name, "-u", "root", "-e", "/bin/sh", "/hwk/stage2.sh"}
	exit, err := k.Runner.Run(ctx, nil, io.MultiWriter(log, tail), io.MultiWriter(log, tail), args...)
	switch {
	case err != nil:
		return fmt.Errorf("wsl.exe -d %s: %w", name, err)
	case wslFailed(exit):
		return parseError(args[:2], decode(tail.Bytes()), exit)
	case exit != 0:
		return fmt.Errorf("stage2.sh exited with %d:\n%s", exit, decode(tail.Bytes()))
	}
	if err := k.run(ctx, nil, out, "--export", name, "-"); err != nil {
		return fmt.Errorf("export WSL distribution %s: %w", name, err)
	}
	return nil
}

// run runs a wsl.exe command of its own with stdin and its standard
// output to stdout (a tar, for --export -), and returns an *Error when it
// fails: wsl.exe writes its messages to stdout, so stdout's end is kept to
// read one.
func (k Kernel) run(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) error {
	tail := &tailBuffer{max: 4096}
	var stderr tailBuffer
	stderr.max = 4096
	exit, err := k.Runner.Run(ctx, stdin, io.MultiWriter(stdout, tail), &stderr, args...)
	if err != nil {
		return err
	}
	if exit != 0 {
		return parseError(args, decode(tail.Bytes())+"\n"+decode(stderr.Bytes()), exit)
	}
	return nil
}
