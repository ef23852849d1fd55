//go:build windows

package hyperv

import (
	"io"
	"os/exec"
)

// startPowerShell starts Windows PowerShell 5.1 (it ships with every
// Windows and has the Hyper-V module; PowerShell 7 loads it only through
// a compatibility session) reading commands from stdin.
func startPowerShell(stderr io.Writer) (process, error) {
	exe, err := exec.LookPath("powershell.exe")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-NoLogo", "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-Command", "-")
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
func (p *osProcess) Stdout() io.Reader           { return p.stdout }
func (p *osProcess) Kill() error {
	p.stdin.Close()
	err := p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	return err
}
