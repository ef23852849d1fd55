package node

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// startSSHD runs a real OpenSSH server on loopback with a fresh host key
// that accepts one fresh client key. Without sshd the test skips, unless
// HWK_REQUIRE_SSHD=1 (set by .ci/run).
func startSSHD(t *testing.T) (addr string, hostKey ssh.PublicKey, client ssh.Signer) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test; -short skips it")
	}
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		sshd = "/usr/sbin/sshd"
	}
	if _, err := os.Stat(sshd); err != nil {
		if os.Getenv("HWK_REQUIRE_SSHD") == "1" {
			t.Fatal("HWK_REQUIRE_SSHD=1 but there is no sshd (Debian: openssh-server)")
		}
		t.Skip("no sshd")
	}
	dir := t.TempDir()
	writeKey := func(name string) (ssh.Signer, ssh.PublicKey) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		must(t, err)
		block, err := ssh.MarshalPrivateKey(priv, "")
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600))
		s, err := ssh.NewSignerFromKey(priv)
		must(t, err)
		return s, s.PublicKey()
	}
	_, hostKey = writeKey("host_key")
	client, clientPub := writeKey("client_key")
	must(t, os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(clientPub), 0o600))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr = ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cfg := fmt.Sprintf(`Port %s
ListenAddress 127.0.0.1
HostKey %s/host_key
AuthorizedKeysFile %s/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
PidFile %s/sshd.pid
`, port, dir, dir, dir)
	must(t, os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600))
	if os.Geteuid() == 0 {
		_ = os.MkdirAll("/run/sshd", 0o755) // privilege separation directory
	}
	cmd := exec.Command(sshd, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			t.Fatalf("sshd did not listen on %s:\n%s", addr, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return addr, hostKey, client
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestSSHAgainstOpenSSH(t *testing.T) {
	addr, hostKey, key := startSSHD(t)
	u, err := user.Current()
	must(t, err)
	tr, err := NewSSH(SSHConfig{Addr: addr, User: u.Username, Key: key, HostKey: hostKey, Shell: POSIX})
	must(t, err)
	defer tr.Close()
	n := New("vm-1", config.Linux, tr)
	ctx := context.Background()

	// argv survives the command line: spaces, quotes, $ and ; are literal.
	odd := `it's a "test"; $HOME $(id) \n`
	out, err := n.Output(ctx, "printf", "%s", odd)
	must(t, err)
	if out != odd {
		t.Errorf("argv came back as %q, want %q", out, odd)
	}

	var stderr bytes.Buffer
	err = n.Run(ctx, Cmd{Args: []string{"sh", "-c", "echo oops >&2; exit 7"}, Stderr: &stderr})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 7 || ee.Node != "vm-1" || strings.TrimSpace(ee.Stderr) != "oops" || stderr.String() != "oops\n" {
		t.Fatalf("exit 7: %#v (stderr %q)", err, stderr.String())
	}

	// A 4 MiB stream in, checked on the far side.
	data := make([]byte, 4<<20)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	target := filepath.Join(t.TempDir(), "sub dir", "blob")
	must(t, n.CopyTo(ctx, bytes.NewReader(data), target, 0o640))
	out, err = n.Output(ctx, "sha256sum", target)
	must(t, err)
	if !strings.HasPrefix(out, hex.EncodeToString(sum[:])) {
		t.Errorf("sha256 %q, want %x", out, sum)
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode: %v %v", fi.Mode(), err)
	}

	// Many commands share the one connection.
	for i := range 20 {
		if out, err := n.Output(ctx, "echo", fmt.Sprint(i)); err != nil || out != fmt.Sprintf("%d\n", i) {
			t.Fatalf("command %d: %q %v", i, out, err)
		}
	}

	// With TTY the command gets a terminal of that size (hwk ssh, hwk
	// exec at a terminal); without, none.
	var tty bytes.Buffer
	must(t, n.Run(ctx, Cmd{Args: []string{"sh", "-c", "tty; stty size"}, Stdout: &tty, TTY: &TermSize{Rows: 33, Cols: 101}}))
	if !strings.Contains(tty.String(), "/dev/pts/") || !strings.Contains(tty.String(), "33 101") {
		t.Errorf("with a TTY: %q", tty.String())
	}
	if out, _ := n.Output(ctx, "sh", "-c", "tty || true"); !strings.Contains(out, "not a tty") {
		t.Errorf("without a TTY: %q", out)
	}

	// A cancelled context ends a command that would run forever.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := n.Run(cctx, Cmd{Args: []string{"sleep", "30"}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled sleep: %v", err)
	}
}

func TestSSHRefusesOtherHostKey(t *testing.T) {
	addr, _, key := startSSHD(t)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, err := ssh.NewPublicKey(other.Public())
	must(t, err)
	tr, err := NewSSH(SSHConfig{Addr: addr, User: "root", Key: key, HostKey: otherPub})
	must(t, err)
	err = New("vm", config.Linux, tr).Run(context.Background(), Cmd{Args: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "host key mismatch") {
		t.Fatalf("wrong host key: %v", err)
	}
	if _, err := NewSSH(SSHConfig{Addr: addr, User: "root", Key: key}); err == nil || !strings.Contains(err.Error(), "no pinned host key") {
		t.Errorf("no host key: %v", err)
	}
}
