package hyperv

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"runtime"
	"time"

	"github.com/hwk-dev/hwk/internal/drivers/winhost"
	"github.com/hwk-dev/hwk/internal/hostexec"
)

// errNotWindows is every host except Windows: Hyper-V is Windows'.
var errNotWindows = errors.New("Hyper-V runs only on Windows")

// NewSession returns a session of its own, for a caller that needs one apart
// from the process-wide session (a test standing for one hwk command);
// stray output goes to log.
func NewSession(log io.Writer) *Session {
	return &Session{start: startPowerShell, Log: log}
}

// errWSL is Linux hwk in a WSL distribution, whose PATH reaches
// Windows' powershell.exe: the driver would hand Windows Linux paths.
var errWSL = errors.New("Hyper-V is driven by hwk.exe on Windows, and this is the Linux hwk in a WSL distribution")

// startPowerShell starts Windows PowerShell 5.1 (it ships with every
// Windows and has the Hyper-V module; PowerShell 7 loads it only through
// a compatibility session) reading commands from stdin. Off Windows there
// is no powershell.exe, short of a test's fake one first on PATH, or WSL's
// interop, which is refused.
func startPowerShell(stderr io.Writer) (process, error) {
	if runtime.GOOS != "windows" && winhost.InWSL() {
		return nil, errWSL
	}
	exe, err := exec.LookPath("powershell.exe")
	if err != nil {
		if runtime.GOOS != "windows" {
			return nil, errNotWindows
		}
		return nil, err
	}
	cmd := hostexec.Command(context.Background(), exe, "-NoLogo", "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-Command", "-")
	// The session sets its console's output code page to UTF-8; in a
	// console of its own, the user's keeps its own.
	ownConsole(cmd)
	// A child of PowerShell's that keeps its stderr open (a cmdlet's
	// helper) must not hold Kill's wait, and the session's lock with it.
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &osProcess{cmd: cmd, stdin: stdin, stdout: stdout}, nil
}

type osProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
}

func (p *osProcess) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *osProcess) Stdout() io.Reader { return p.stdout }

// Kill ends the session: stdin closed first, which PowerShell reading
// commands from it takes as the end, then the process killed in case it
// is stuck in a script.
func (p *osProcess) Kill() error {
	p.stdin.Close()
	err := p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	return err
}

// shared is the session every driver of this process uses, so that one
// hwk command starts PowerShell once however many drivers it makes.
var shared = &Session{start: startPowerShell}

// SharedSession returns the session the process's Hyper-V drivers use, for
// other drivers that change the host's network beside them (wsl2).
func SharedSession() *Session { return shared }
