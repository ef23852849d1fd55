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
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// startSSHD runs a real OpenSSH server on loopback with a fresh host key
// that accepts one fresh client key. Without sshd the test skips, unless
// HWK_REQUIRE_SSHD=1 (set by .ci/run).
func startSSHD(t testing.TB) (addr string, hostKey ssh.PublicKey, client ssh.Signer) {
	t.Helper()
	sshd := findSSHD(t)
	return startSSHDWith(t, sshd, "Subsystem sftp "+sftpServer(t))
}

// findSSHD returns the path of OpenSSH's sshd, which the test skips
// without (before it looks for sftp-server, which comes with sshd).
func findSSHD(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test; -short skips it")
	}
	// The config below is a Linux sshd's (its paths, StrictModes, UsePAM),
	// and the tests run POSIX commands on the server's side.
	if runtime.GOOS == "windows" {
		t.Skip("runs a Linux OpenSSH sshd and POSIX commands on it; the SSH client code is the same on Windows")
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
	return sshd
}

// startSSHDWith starts sshd with extra lines of sshd_config.
func startSSHDWith(t testing.TB, sshd, extra string) (addr string, hostKey ssh.PublicKey, client ssh.Signer) {
	t.Helper()
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
%s
`, port, dir, dir, dir, extra)
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

// sftpServer returns the path of OpenSSH's sftp-server, which Debian's
// openssh-server ships beside sshd.
func sftpServer(t testing.TB) string {
	for _, p := range []string{"/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/libexec/sftp-server"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("sshd is here but its sftp-server is not")
	return ""
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sshNode returns a handle on a fresh sshd (startSSHD) as the current user, for
// a node of os.
func sshNode(t testing.TB, name string, os config.OS) *Node {
	t.Helper()
	addr, hostKey, key := startSSHD(t)
	u, err := user.Current()
	must(t, err)
	tr, err := NewSSH(SSHConfig{Addr: addr, User: u.Username, Key: key, HostKey: hostKey, Shell: ShellFor(os)})
	must(t, err)
	t.Cleanup(func() { tr.Close() })
	return New(name, os, tr)
}

func TestSSHAgainstOpenSSH(t *testing.T) {
	n := sshNode(t, "vm-1", config.Linux)
	ctx := context.Background()
	must(t, n.Connect(ctx))

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
	// Connect alone proves the same, before any command (the Hyper-V
	// driver's check of a node KVP does not confirm).
	if err := New("vm", config.Windows, tr).Connect(context.Background()); err == nil || !strings.Contains(err.Error(), "host key mismatch") {
		t.Errorf("connect with the wrong host key: %v", err)
	}
	if _, err := NewSSH(SSHConfig{Addr: addr, User: "root", Key: key}); err == nil || !strings.Contains(err.Error(), "no pinned host key") {
		t.Errorf("no host key: %v", err)
	}
}

// TestCopyToWindowsNodeOverSFTP checks that files reach a Windows node
// over SFTP byte for byte (issue 26): the handle copies a stream holding
// every byte value, replaces a file, and leaves nothing behind when its
// input breaks. sshd here runs Linux, so the paths are POSIX ones (see
// TestSFTPPath).
func TestCopyToWindowsNodeOverSFTP(t *testing.T) {
	n := sshNode(t, "hwk-win-1", config.Windows)
	ctx := context.Background()

	// Every byte value, in every position mod 256, then CR LF pairs, a
	// lone LF, a NUL run and a UTF-16LE BOM, the bytes a text pipeline
	// would rewrite; 3 MiB in all, so that writes overlap.
	var data []byte
	for i := 0; len(data) < 3<<20; i++ {
		for b := range 256 {
			data = append(data, byte(b+i))
		}
	}
	data = append(data, "\r\n\r\n\n\x00\x00\x00\xff\xfe"...)
	target := filepath.Join(t.TempDir(), "C dir", "sub", "load.tar")
	must(t, n.CopyTo(ctx, bytes.NewReader(data), target, 0o600))
	got, err := os.ReadFile(target)
	must(t, err)
	if !bytes.Equal(got, data) {
		t.Fatalf("copied %d bytes, got %d back, first difference at %d", len(data), len(got), firstDiff(got, data))
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode: %v %v", fi.Mode(), err)
	}

	// A second copy replaces the file.
	must(t, n.CopyTo(ctx, strings.NewReader("second"), target, 0o600))
	if got, _ := os.ReadFile(target); string(got) != "second" {
		t.Errorf("after the second copy: %q", got)
	}

	// A broken input fails the copy and leaves the old file, and no
	// temporary one.
	err = n.CopyTo(ctx, io.MultiReader(bytes.NewReader(data[:1<<20]), failing{}), target, 0o600)
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("broken input: %v", err)
	}
	if got, _ := os.ReadFile(target); string(got) != "second" {
		t.Errorf("after a failed copy the file holds %d bytes, want the old 6", len(got))
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(target), "*"))
	if len(left) != 1 {
		t.Errorf("files left beside the target: %q", left)
	}

	// The connection outlives the failed copy.
	must(t, n.CopyTo(ctx, strings.NewReader("third"), target, 0o600))
	if got, _ := os.ReadFile(target); string(got) != "third" {
		t.Errorf("after the third copy: %q", got)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// BenchmarkCopyTo compares the two ways a file reaches a node over SSH, on
// a loopback sshd: SFTP (Windows nodes) and the sh script's cat (Linux
// nodes). go test -run - -bench CopyTo ./pkg/node
func BenchmarkCopyTo(b *testing.B) {
	data := make([]byte, 64<<20)
	_, _ = rand.Read(data)
	for _, c := range []struct {
		name string
		os   config.OS
	}{{"sftp", config.Windows}, {"sh-cat", config.Linux}} {
		b.Run(c.name, func(b *testing.B) {
			n := sshNode(b, "bench", c.os)
			target := filepath.Join(b.TempDir(), "f")
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := n.CopyTo(context.Background(), bytes.NewReader(data), target, 0o600); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestCopyToWindowsWithoutSFTP checks that an sshd without the sftp
// subsystem (a node image whose sshd_config lost it) fails the copy with a
// message naming it, and that the connection still runs commands.
func TestCopyToWindowsWithoutSFTP(t *testing.T) {
	addr, hostKey, key := startSSHDWith(t, findSSHD(t), "")
	u, err := user.Current()
	must(t, err)
	tr, err := NewSSH(SSHConfig{Addr: addr, User: u.Username, Key: key, HostKey: hostKey, Shell: POSIX})
	must(t, err)
	defer tr.Close()
	ctx := context.Background()
	err = New("hwk-win-1", config.Windows, tr).CopyTo(ctx, strings.NewReader("x"), filepath.Join(t.TempDir(), "f"), 0o600)
	if err == nil || !strings.Contains(err.Error(), "is the node's sshd missing its sftp subsystem?") {
		t.Fatalf("copy without sftp: %v", err)
	}
	if out, err := New("vm", config.Linux, tr).Output(ctx, "echo", "ok"); err != nil || out != "ok\n" {
		t.Errorf("a command after the failed copy: %q %v", out, err)
	}
}

// silentProxy forwards TCP to an sshd until silence, after which every
// connection open then stays open and forwards nothing, in either
// direction: a peer gone silent without a FIN or a RST, as a Windows node
// is while it reboots after its rename, or while Calico's vSwitch takes
// its address. Connections made later forward as usual.
type silentProxy struct {
	addr string
	mu   sync.Mutex
	live []*atomic.Bool
}

func newSilentProxy(t *testing.T, target string) *silentProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &silentProxy{addr: ln.Addr().String()}
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			on := &atomic.Bool{}
			on.Store(true)
			p.mu.Lock()
			p.live = append(p.live, on)
			p.mu.Unlock()
			go pipe(out, in, on)
			go pipe(in, out, on)
		}
	}()
	return p
}

// pipe copies from src to dst while on; after, it reads and drops.
func pipe(dst, src net.Conn, on *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && on.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// silence stops every connection open now from forwarding.
func (p *silentProxy) silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, on := range p.live {
		on.Store(false)
	}
}

// within runs fn and fails the test when it has not returned after d.
// The bounds below are loose (a session on the loopback sshd takes
// seconds to start on some machines); what they catch is a hang.
func within[T any](t *testing.T, d time.Duration, what string, fn func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- fn() }()
	select {
	case v := <-done:
		return v
	case <-time.After(d):
		t.Fatalf("%s hung: no return after %s", what, d)
		panic("unreachable")
	}
}

// TestSSHSilentConnection checks that a connection gone silent ends the
// command on it within a few keepalive intervals, with an error naming
// the missed keepalives, that the next command redials, and that a long
// command on a live connection is not cut off.
func TestSSHSilentConnection(t *testing.T) {
	// Why: a connection goes silent when a Windows node reboots for its
	// rename or Calico's vSwitch moves its address (issue 37); without
	// keepalives the command would hang until up's own deadline.
	addr, hostKey, key := startSSHD(t)
	p := newSilentProxy(t, addr)
	u, err := user.Current()
	must(t, err)
	tr, err := NewSSH(SSHConfig{Addr: p.addr, User: u.Username, Key: key, HostKey: hostKey,
		KeepaliveInterval: 100 * time.Millisecond, KeepaliveMisses: 3})
	must(t, err)
	t.Cleanup(func() { tr.Close() })
	n := New("vm", config.Linux, tr)
	ctx := context.Background()

	// Longer than 3 intervals, on a live connection: not a total limit.
	must(t, within(t, 30*time.Second, "sleep 1", func() error { return n.Run(ctx, Cmd{Args: []string{"sleep", "1"}}) }))

	// A command running when the connection goes silent.
	started := make(chan struct{})
	out := &signalWriter{seen: "started", ch: started}
	errc := make(chan error, 1)
	go func() { errc <- n.Run(ctx, Cmd{Args: []string{"sh", "-c", "echo started; sleep 60"}, Stdout: out}) }()
	select {
	case <-started:
	case err := <-errc:
		t.Fatalf("the long command ended before the silence: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the long command did not start")
	}
	p.silence()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "keepalive") {
			t.Errorf("a command on a silent connection: %v; want an error that names the missed keepalives", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a command on a silent connection hung")
	}

	// The next command redials.
	got := within(t, 30*time.Second, "the command after the silence", func() error {
		out, err := n.Output(ctx, "echo", "again")
		if err == nil && out != "again\n" {
			err = fmt.Errorf("output %q", out)
		}
		return err
	})
	must(t, got)

	// A connection that goes silent between commands: the next command
	// fails (its session never opens) instead of hanging, without a
	// deadline of its own.
	p.silence()
	err = within(t, 10*time.Second, "a command on a connection silent since the last one", func() error {
		_, err := n.Output(ctx, "echo", "lost")
		return err
	})
	if err == nil {
		t.Error("a command on a silent connection succeeded")
	}
	must(t, within(t, 30*time.Second, "the command after the second silence", func() error { return n.Run(ctx, Cmd{Args: []string{"true"}}) }))
}

// TestSSHDeadlineOnSilentConnection checks that with keepalives off, a
// probe's own deadline still bounds it on a silent connection: opening the
// session honours the context, not only the wait for the command's end.
func TestSSHDeadlineOnSilentConnection(t *testing.T) {
	addr, hostKey, key := startSSHD(t)
	p := newSilentProxy(t, addr)
	u, err := user.Current()
	must(t, err)
	tr, err := NewSSH(SSHConfig{Addr: p.addr, User: u.Username, Key: key, HostKey: hostKey, KeepaliveInterval: -1})
	must(t, err)
	t.Cleanup(func() { tr.Close() })
	n := New("vm", config.Linux, tr)
	must(t, n.Connect(context.Background()))
	p.silence()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = within(t, 5*time.Second, "a probe with a deadline", func() error { return n.Run(ctx, Cmd{Args: []string{"true"}}) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a probe past its deadline on a silent connection: %v", err)
	}
}

// signalWriter closes ch once what it was written contains seen.
type signalWriter struct {
	mu   sync.Mutex
	b    strings.Builder
	seen string
	ch   chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.seen) {
		w.once.Do(func() { close(w.ch) })
	}
	return len(p), nil
}

// TestSSHConnectStages checks that a failed connection reports how far it
// got (ConnectError), which is how up tells a Windows node still in Setup
// (nothing listens) from one whose seed is not applied yet (its image's
// own host key, or the cluster's key refused).
func TestSSHConnectStages(t *testing.T) {
	addr, hostKey, key := startSSHD(t)
	u, err := user.Current()
	must(t, err)
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	otherKey, err := ssh.NewSignerFromKey(otherPriv)
	must(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	closed := ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		name string
		addr string
		key  ssh.Signer
		host ssh.PublicKey
		want ConnectStage
	}{
		{"nothing listens", closed, key, hostKey, StageDial},
		{"another host key", addr, key, otherKey.PublicKey(), StageHostKey},
		{"the client key refused", addr, otherKey, hostKey, StageAuth},
	} {
		tr, err := NewSSH(SSHConfig{Addr: c.addr, User: u.Username, Key: c.key, HostKey: c.host})
		must(t, err)
		err = tr.Connect(context.Background())
		var ce *ConnectError
		if !errors.As(err, &ce) || ce.Stage != c.want {
			t.Errorf("%s: %#v, want a ConnectError at stage %d", c.name, err, c.want)
		}
	}
}
