package node_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/internal/testing/pssim"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// windowsSSHD serves SSH on a loopback port with m behind it: each exec
// request's command line goes to m.SSHExec, which is Win32-OpenSSH's sshd
// with DefaultShell powershell.exe; its stdout and stderr go back on the
// channel and its status as exit-status (RFC 4254 6.5, 6.10). A command
// the model cannot run fails the test.
func windowsSSHD(t *testing.T, m *pssim.Machine) *node.Node {
	t.Helper()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	host, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	_, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ssh.NewSignerFromKey(clientPriv)
	if err != nil {
		t.Fatal(err)
	}
	conf := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) != string(client.PublicKey().Marshal()) {
			return nil, errors.New("not the cluster's key")
		}
		return nil, nil
	}}
	conf.AddHostKey(host)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var mu sync.Mutex // the machine serves one command at a time
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				_, chans, reqs, err := ssh.NewServerConn(c, conf)
				if err != nil {
					return
				}
				go ssh.DiscardRequests(reqs)
				for nc := range chans {
					if nc.ChannelType() != "session" {
						_ = nc.Reject(ssh.UnknownChannelType, "session only")
						continue
					}
					ch, creqs, err := nc.Accept()
					if err != nil {
						return
					}
					go func() {
						defer ch.Close()
						for r := range creqs {
							if r.Type != "exec" {
								_ = r.Reply(false, nil)
								continue
							}
							var exec struct{ Command string }
							if err := ssh.Unmarshal(r.Payload, &exec); err != nil {
								_ = r.Reply(false, nil)
								return
							}
							_ = r.Reply(true, nil)
							mu.Lock()
							out, errs, code := m.SSHExec(exec.Command)
							mu.Unlock()
							if code == pssim.SSHUnmodelled {
								t.Errorf("the model cannot run %q: %s", exec.Command, errs)
							}
							_, _ = ch.Write([]byte(out))
							_, _ = ch.Stderr().Write([]byte(errs))
							_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
							return
						}
					}()
				}
			}()
		}
	}()
	tr, err := node.NewSSH(node.SSHConfig{Addr: l.Addr().String(), User: "Administrator", Key: client,
		HostKey: host.PublicKey(), Shell: node.ShellFor(config.Windows)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return node.New("hwk-win-1", config.Windows, tr)
}

// windowsNode returns a Server 2022 with sshd's DefaultShell as
// node-images/windows/provision.ps1 sets it.
func windowsNode() *pssim.Machine {
	m := pssim.NewServer2022()
	m.Registry[strings.ToLower(`HKLM:\SOFTWARE\OpenSSH`)] = map[string]any{"DefaultShell": `C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe`}
	return m
}

// TestWindowsScriptsOverSSH runs hwk's own node scripts through the real
// SSH transport (ScriptArgs, Quote, an exec request) into the model of
// sshd and the two powershell.exe it starts.
func TestWindowsScriptsOverSSH(t *testing.T) {
	ctx := context.Background()
	m := windowsNode()
	n := windowsSSHD(t, m)

	// up's containerd probe: exit 1 while containerd does not run
	// (bootstrap.ContainerdRunningScript; WindowsBootScript adds
	// [System.Environment]::MachineName, which the model lacks).
	err := n.RunScript(ctx, bootstrap.ContainerdRunningScript, node.Cmd{})
	var ee *node.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Errorf("containerd probe without containerd: %v", err)
	}
	m.Services["containerd"] = &pssim.Service{Name: "containerd", DisplayName: "containerd", Status: "Running", StartType: "Automatic"}
	var out strings.Builder
	if err := n.RunScript(ctx, "'probe'\n"+bootstrap.ContainerdRunningScript, node.Cmd{Stdout: &out}); err != nil || out.String() != "probe\r\n" {
		t.Errorf("containerd probe with containerd running: %v, stdout %q", err, out.String())
	}
}

// TestWindowsThrowReachesTheUser checks that a node script that throws
// fails with the thrown message, decoded from the CLIXML the nested
// powershell.exe writes to the SSH session's stderr, and that the caller's
// stderr gets text.
func TestWindowsThrowReachesTheUser(t *testing.T) {
	ctx := context.Background()
	n := windowsSSHD(t, windowsNode())
	const msg = `containerd's log (C:\ProgramData\containerd\root\containerd.log) ends with <fatal> & "more"`
	script := "$ErrorActionPreference = 'Stop'\n'working'\nif ($true) {\n    throw 'containerd''s log (C:\\ProgramData\\containerd\\root\\containerd.log) ends with <fatal> & \"more\"'\n}\n"
	var stdout, stderr strings.Builder
	err := n.RunScript(ctx, script, node.Cmd{Stdout: &stdout, Stderr: &stderr})
	var ee *node.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("err = %v, want an exit status 1", err)
	}
	if !strings.HasSuffix(err.Error(), "exited with status 1: "+msg) || strings.Contains(err.Error(), "CLIXML") {
		t.Errorf("err = %v\nwant it to end with the thrown message %s", err, msg)
	}
	if ee.Stderr != msg {
		t.Errorf("ExitError.Stderr = %q", ee.Stderr)
	}
	if stdout.String() != "working\r\n" {
		t.Errorf("stdout = %q", stdout.String())
	}
	if s := stderr.String(); !strings.HasPrefix(s, msg+"\r\nAt line:4 char:5\r\n") || strings.Contains(s, "<S ") {
		t.Errorf("the caller's stderr: %q", s)
	}

	// A cmdlet's error under 'Stop' (the kubelet restart of a node with
	// no kubelet) reaches the user the same way.
	err = n.RunScript(ctx, bootstrap.Scripts()["restartKubeletScript"], node.Cmd{})
	if err == nil || strings.Contains(err.Error(), "CLIXML") || !strings.Contains(err.Error(), "kubelet") {
		t.Errorf("restart a kubelet that is not there: %v", err)
	}
}

// TestWindowsExitStatusOverSSH checks that a node script's `exit 3`
// reaches hwk as status 3, and that a script that throws still ends with 1.
func TestWindowsExitStatusOverSSH(t *testing.T) {
	// Why: sshd's DefaultShell runs hwk's command line with -Command,
	// whose status is $?'s 0 or 1 unless the line itself calls exit
	// (ConsoleHost.DoRunspaceLoop; PowerShell/PowerShell#13501), so the
	// line ends with an exit of its command's status (node.Quote).
	n := windowsSSHD(t, windowsNode())
	for script, want := range map[string]int{"exit 3": 3, "throw 'no'": 1} {
		err := n.RunScript(context.Background(), script, node.Cmd{})
		var ee *node.ExitError
		if !errors.As(err, &ee) || ee.Code != want {
			t.Errorf("%s over SSH: %v, want status %d", script, err, want)
		}
	}
	if err := n.RunScript(context.Background(), "exit 0", node.Cmd{}); err != nil {
		t.Errorf("exit 0 over SSH: %v", err)
	}
}
