package wsl2

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/internal/state"
)

// Kernel runs a node image's second stage (pkg/nodeimage.Kernel) in a
// throwaway WSL 2 distribution, on a Windows host with no Docker engine:
// the stage-1 root is imported from standard input, the script runs in it
// as root and offline, and the distribution is exported to standard output
// and unregistered.
type Kernel struct {
	Runner Runner
	// Dir holds the distributions' disks while they exist (hwk's cache).
	Dir string
}

// Name implements pkg/nodeimage.Kernel.
func (Kernel) Name() string { return "WSL 2" }

// Files implements pkg/nodeimage's kernelFiles: what WSL's init reads at
// the distribution's first start, so that it leaves the root alone and
// Windows gets no Start menu shortcut or Terminal profile for it.
// pkg/nodeimage drops both files from the export.
func (Kernel) Files() map[string]string {
	// wsl.conf: no host timezone, GPU library path, generated hosts or
	// resolv.conf, no Windows PATH or interop, no drives mounted, no
	// systemd. Keys and defaults: learn.microsoft.com/windows/wsl/wsl-config
	// (wsl.conf) and microsoft/WSL src/shared/inc/WslDistributionConfig.h;
	// the shortcut and profile: /etc/wsl-distribution.conf
	// (learn.microsoft.com/windows/wsl/build-custom-distro).
	return map[string]string{
		"etc/wsl.conf": `[boot]
systemd=false
[automount]
enabled=false
mountFsTab=false
ldconfig=false
[network]
generateHosts=false
generateResolvConf=false
[interop]
enabled=false
appendWindowsPath=false
[time]
useWindowsTimezone=false
[gpu]
enabled=false
[general]
guiApplications=false
`,
		"etc/wsl-distribution.conf": `[shortcut]
enabled=false
[windowsterminal]
enabled=false
`,
	}
}

// Check returns an error unless this host's WSL can configure a root
// (wsl.exe answers --version with WSL 2.0 or newer), before a build
// commits to it.
func (k Kernel) Check(ctx context.Context) error {
	// Why 2.0: the inbox wsl.exe, which predates it, also reports its
	// errors with no code, which the build's clean-up reads.
	var f hostFacts
	if err := versions(ctx, k.Runner, &f); err != nil {
		return err
	}
	return judgeVersion(f)
}

// Configure implements pkg/nodeimage.Kernel.
func (k Kernel) Configure(ctx context.Context, kind string, root io.Reader, log, out io.Writer) (err error) {
	if err := os.MkdirAll(k.Dir, 0o700); err != nil {
		return err
	}
	cleanup := context.WithoutCancel(ctx)
	// Distributions of builds that were killed go first; failing to
	// remove one does not stop this build.
	if err := state.SweepLeftovers(k.Dir, func(name string) error { return k.remove(cleanup, name) }); err != nil {
		fmt.Fprintf(log, "warning: %v\n", err)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "hwk-build-" + kind + "-" + hex.EncodeToString(suffix)
	held, err := state.HoldLeftover(k.Dir, name)
	if err != nil {
		return err
	}
	dir := filepath.Join(k.Dir, name)
	defer func() {
		// A distribution that will not go does not undo the build (WSL
		// itself gives up deleting a busy ext4.vhdx after 10 s); the next
		// build's sweep tries again.
		if rerr := state.EndLeftover(held, k.remove(cleanup, name)); rerr != nil {
			fmt.Fprintf(log, "warning: %v (the next build removes it)\n", rerr)
		}
	}()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}

	// wsl.exe --help: "--import <Distro> <InstallLocation> <FileName> ...
	// The filename can be - for standard input", and for --export "The
	// filename can be - for standard output".
	if err := k.run(ctx, root, io.Discard, "--import", name, dir, "-", "--version", "2"); err != nil {
		// WSL is the kernel only because Docker did not answer: the user
		// can fix either.
		return fmt.Errorf("import the stage-1 root as WSL distribution %s: %w\n  fix: enable WSL 2 (`wsl.exe --install`, then restart), or start Docker Desktop with Linux containers, and build again", name, err)
	}
	// One writer for both streams: os/exec then copies them in one
	// goroutine, so the tail and the log are never written at once.
	tail := hostexec.NewTail(4096)
	w := io.MultiWriter(log, tail)
	// In a network namespace of its own: the distribution shares the VM's
	// network, and stage 2 must need none (as in Docker, NetworkMode none).
	args := []string{"-d", name, "-u", "root", "-e", "/usr/bin/unshare", "--net", "/bin/sh", "/hwk/stage2.sh"}
	exit, err := k.Runner.Run(ctx, nil, w, w, args...)
	switch {
	case err != nil:
		return fmt.Errorf("wsl.exe -d %s: %w", name, err)
	case wslFailed(exit):
		return parseError(args[:2], decode(tail.Bytes()), exit)
	case exit != 0:
		return fmt.Errorf("stage2.sh exited with %d:\n%s", exit, decode(tail.Bytes()))
	}
	// Stopped first: an export does not stop the distribution, and
	// nothing a maintainer script started may write while it runs.
	if _, err := manage(ctx, k.Runner, "--terminate", name); err != nil {
		return fmt.Errorf("stop WSL distribution %s: %w", name, err)
	}
	if err := k.run(ctx, nil, out, "--export", name, "-"); err != nil {
		return fmt.Errorf("export WSL distribution %s: %w", name, err)
	}
	return nil
}

// remove unregisters build distribution name, which deletes its disk, and
// removes its directory; a distribution that is not there is no error.
func (k Kernel) remove(ctx context.Context, name string) error {
	if _, err := manage(ctx, k.Runner, "--unregister", name); err != nil && !isCode(err, "WSL_E_DISTRO_NOT_FOUND") {
		return fmt.Errorf("unregister the build distribution %s: %w", name, err)
	}
	return os.RemoveAll(filepath.Join(k.Dir, name))
}

// run runs a wsl.exe command of its own with stdin and its standard
// output to stdout (a tar, for --export -), and returns an *Error when it
// fails: wsl.exe writes its messages to stdout, so stdout's end is kept to
// read one.
func (k Kernel) run(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) error {
	tail := hostexec.NewTail(4096)
	stderr := hostexec.NewTail(4096)
	exit, err := k.Runner.Run(ctx, stdin, io.MultiWriter(stdout, tail), stderr, args...)
	if err != nil {
		return err
	}
	if exit != 0 {
		return parseError(args, decode(afterBinary(tail.Bytes()))+"\n"+decode(stderr.Bytes()), exit)
	}
	return nil
}

// afterBinary returns what follows the last NUL byte of b: a failed --export -
// writes its message to stdout after the part of the tar it wrote, and
// the tar's NULs would make the whole read as UTF-16. A message in UTF-16
// (NULs between ASCII letters) is kept whole when b holds nothing else.
func afterBinary(b []byte) []byte {
	i := bytes.LastIndexByte(b, 0)
	if i < 0 || utf16Message(b) {
		return b
	}
	return b[i+1:]
}

// utf16Message reports whether b is all UTF-16LE text of ASCII: every odd
// byte NUL, every even byte not.
func utf16Message(b []byte) bool {
	if len(b) < 2 || len(b)%2 != 0 {
		return false
	}
	for i := 0; i < len(b); i += 2 {
		if b[i] == 0 || b[i+1] != 0 {
			return false
		}
	}
	return true
}
