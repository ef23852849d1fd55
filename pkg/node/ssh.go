package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// SSHConfig describes how to reach a node over SSH.
type SSHConfig struct {
	// Addr is host:port.
	Addr string
	User string
	// Key is the cluster's private key.
	Key ssh.Signer
	// HostKey is the node's host key, pinned: a node presenting any other
	// key is refused. There is deliberately no way to skip the check.
	HostKey ssh.PublicKey
	// Shell is the dialect of the node's login shell, which parses the
	// command line SSH delivers.
	Shell Shell
	// DialTimeout bounds the TCP connect and handshake; 0 means 30s.
	DialTimeout time.Duration
	// KeepaliveInterval is how often the client asks the server for a
	// keepalive@openssh.com reply (0 means 15s; negative, never), and
	// KeepaliveMisses how many intervals may pass without a reply before
	// the connection is closed (0 means 3), which ends every command on
	// it with an error and has the next call redial. See Run for why
	// this, and not a fixed time limit per command.
	KeepaliveInterval time.Duration
	KeepaliveMisses   int
}

// The keepalive defaults, OpenSSH's ServerAliveInterval and
// ServerAliveCountMax as people commonly set them: a dead connection is
// found within 45s.
const (
	defaultKeepaliveInterval = 15 * time.Second
	defaultKeepaliveMisses   = 3
)

// SSH is a Transport over one SSH connection, opened on first use and
// shared by every command (one session each).
type SSH struct {
	cfg SSHConfig

	mu   sync.Mutex
	conn *sshConn
}

// sshConn is one connection and why it was closed, once it was.
type sshConn struct {
	client *ssh.Client
	mu     sync.Mutex
	lost   error
}

// closeWith closes the connection, recording why first, so the commands
// it ends report the reason rather than a bare EOF.
func (c *sshConn) closeWith(why error) {
	c.mu.Lock()
	if c.lost == nil {
		c.lost = why
	}
	c.mu.Unlock()
	c.client.Close()
}

// why returns the reason the connection was closed, or nil.
func (c *sshConn) why() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// NewSSH returns a transport for cfg. It connects lazily.
func NewSSH(cfg SSHConfig) (*SSH, error) {
	switch {
	case cfg.Addr == "":
		return nil, errors.New("ssh: no address")
	case cfg.Key == nil:
		return nil, errors.New("ssh: no client key")
	case cfg.HostKey == nil:
		return nil, fmt.Errorf("ssh %s: no pinned host key; hwk never connects to a node whose host key it does not know", cfg.Addr)
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 30 * time.Second
	}
	if cfg.KeepaliveInterval == 0 {
		cfg.KeepaliveInterval = defaultKeepaliveInterval
	}
	if cfg.KeepaliveMisses <= 0 {
		cfg.KeepaliveMisses = defaultKeepaliveMisses
	}
	return &SSH{cfg: cfg}, nil
}

func (s *SSH) connect(ctx context.Context) (*sshConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		return s.conn, nil
	}
	// The host key callback records whether the server showed the pinned
	// key, so that a failed handshake can say which side refused
	// (ConnectError): a node still on its image's own key, or one that
	// does not take the cluster's key yet, is a node whose seed is not
	// applied, not a broken one.
	var shown ConnectStage
	pinned := ssh.FixedHostKey(s.cfg.HostKey)
	conf := &ssh.ClientConfig{
		User: s.cfg.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(s.cfg.Key)},
		HostKeyCallback: func(host string, remote net.Addr, key ssh.PublicKey) error {
			if err := pinned(host, remote, key); err != nil {
				shown = StageHostKey
				return err
			}
			shown = StageAuth
			return nil
		},
		HostKeyAlgorithms: []string{s.cfg.HostKey.Type()},
		Timeout:           s.cfg.DialTimeout,
	}
	d := net.Dialer{Timeout: s.cfg.DialTimeout}
	conn, err := d.DialContext(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return nil, &ConnectError{Addr: s.cfg.Addr, Stage: StageDial, Err: err}
	}
	// The handshake has no context of its own; a deadline bounds it, and
	// the context ends it early.
	_ = conn.SetDeadline(time.Now().Add(s.cfg.DialTimeout))
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	c, chans, reqs, err := ssh.NewClientConn(conn, s.cfg.Addr, conf)
	stop()
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		stage := shown
		if stage == 0 {
			stage = StageHandshake
		}
		return nil, &ConnectError{Addr: s.cfg.Addr, Stage: stage, Err: err}
	}
	_ = conn.SetDeadline(time.Time{})
	s.conn = &sshConn{client: ssh.NewClient(c, chans, reqs)}
	if s.cfg.KeepaliveInterval > 0 {
		go s.keepalive(s.conn)
	}
	return s.conn, nil
}

// keepalive asks the server for a reply every interval, as OpenSSH's
// ServerAliveInterval does, one request in flight at a time, and closes
// the connection once misses intervals have passed without one.
func (s *SSH) keepalive(c *sshConn) {
	// Why: a connection can die without a FIN or RST (a Windows node
	// rebooting after its rename, Calico's vSwitch taking the node's
	// address), and TCP alone would then leave every command on it
	// waiting for many minutes.
	every, misses := s.cfg.KeepaliveInterval, s.cfg.KeepaliveMisses
	closed := make(chan struct{})
	go func() {
		_ = c.client.Wait()
		close(closed)
	}()
	replies := make(chan error, 1)
	pending, missed := false, 0
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-closed:
			return
		case err := <-replies:
			if err != nil {
				return // closed under it; Wait's side reports
			}
			pending, missed = false, 0
		case <-t.C:
			// Why one request at a time: the library answers them in
			// order, and a late reply still proves the connection lives.
			if pending {
				missed++
				if missed >= misses {
					s.dropConn(c, fmt.Errorf("connection lost: no reply to keepalives for %s", time.Duration(misses)*every))
					return
				}
				continue
			}
			pending = true
			go func() {
				// OpenSSH answers an unknown global request with a
				// failure, which is a reply all the same.
				_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
				replies <- err
			}()
		}
	}
}

// Connect implements Connector: it dials and completes the handshake,
// which fails unless the server holds the pinned host key.
func (s *SSH) Connect(ctx context.Context) error {
	_, err := s.connect(ctx)
	return err
}

// ConnectStage is how far a connection got before it failed.
type ConnectStage int

const (
	// StageDial is no TCP connection (nothing listens, or nothing
	// answers).
	StageDial ConnectStage = iota + 1
	// StageHandshake is a TCP connection that opened, whose SSH handshake
	// failed before the server showed a host key.
	StageHandshake
	// StageHostKey is a server that showed a host key other than the
	// pinned one.
	StageHostKey
	// StageAuth is a server that showed the pinned host key but did not
	// take the client's key (or a connection that broke after the key).
	StageAuth
)

// ConnectError is a failure to open a connection to a node.
type ConnectError struct {
	Addr  string
	Stage ConnectStage
	Err   error
}

func (e *ConnectError) Error() string { return "ssh " + e.Addr + ": " + e.Err.Error() }
func (e *ConnectError) Unwrap() error { return e.Err }

// Run implements Transport. It puts no limit on how long a command takes:
// ctx bounds it at every step, opening the session as well as waiting for
// the end (a probe needs a deadline of its own), and the keepalive ends it
// within KeepaliveInterval*KeepaliveMisses once the connection is dead.
func (s *SSH) Run(ctx context.Context, cmd Cmd) error {
	// Why no limit: kubeadm join or an image import runs for many minutes
	// on a healthy connection, and no fixed limit fits both those and a
	// two-second probe (such as up's boot wait).
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	sess, err := s.start(ctx, conn, cmd)
	if err != nil {
		return err
	}
	defer sess.Close()
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// Ask for a kill (servers that do not implement signals ignore
		// it), then close the channel; Wait is not awaited, as it would
		// last until the remote command ends on its own.
		_ = sess.Signal(ssh.SIGKILL)
		sess.Close()
		return ctx.Err()
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		return &ExitError{Code: ee.ExitStatus()}
	}
	if why := conn.why(); why != nil {
		return fmt.Errorf("ssh %s: %w", s.cfg.Addr, why)
	}
	var missing *ssh.ExitMissingError
	if errors.As(err, &missing) {
		return fmt.Errorf("ssh %s: the command ended without an exit status (connection lost?)", s.cfg.Addr)
	}
	if err != nil {
		return fmt.Errorf("ssh %s: %w", s.cfg.Addr, err)
	}
	return nil
}

// start opens a session on conn and starts cmd in it. Each of its
// requests waits for the server's reply, which on a dead connection does
// not come; so it runs aside, and ctx's end returns at once (the session,
// should it open later, is closed then).
func (s *SSH) start(ctx context.Context, conn *sshConn, cmd Cmd) (*ssh.Session, error) {
	type started struct {
		sess *ssh.Session
		err  error
	}
	ch := make(chan started, 1)
	go func() {
		sess, err := s.open(conn, cmd)
		ch <- started{sess, err}
	}()
	select {
	case r := <-ch:
		return r.sess, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.sess != nil {
				r.sess.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func (s *SSH) open(conn *sshConn, cmd Cmd) (*ssh.Session, error) {
	sess, err := conn.client.NewSession()
	if err != nil {
		// A dropped connection: forget it so the next call redials.
		why := conn.why()
		s.drop(conn)
		if why != nil {
			err = why
		}
		return nil, fmt.Errorf("ssh %s: open session: %w", s.cfg.Addr, err)
	}
	sess.Stdout, sess.Stderr = cmd.Stdout, cmd.Stderr
	if cmd.Stdin != nil {
		// Not sess.Stdin: Wait would then also wait for the caller's reader
		// to reach EOF, even after the command has exited.
		in, err := sess.StdinPipe()
		if err != nil {
			sess.Close()
			return nil, fmt.Errorf("ssh %s: %w", s.cfg.Addr, err)
		}
		go func() {
			_, _ = io.Copy(in, cmd.Stdin)
			in.Close()
		}()
	}
	if cmd.TTY != nil {
		modes := ssh.TerminalModes{ssh.ECHO: 1, ssh.TTY_OP_ISPEED: 38400, ssh.TTY_OP_OSPEED: 38400}
		if err := sess.RequestPty("xterm-256color", int(cmd.TTY.Rows), int(cmd.TTY.Cols), modes); err != nil {
			sess.Close()
			return nil, fmt.Errorf("ssh %s: request a terminal: %w", s.cfg.Addr, err)
		}
	}
	if err := sess.Start(Quote(s.cfg.Shell, cmd.Args...)); err != nil {
		sess.Close()
		if why := conn.why(); why != nil {
			err = why
		}
		return nil, fmt.Errorf("ssh %s: start: %w", s.cfg.Addr, err)
	}
	return sess, nil
}

// drop forgets c, if it is still the connection, and closes it.
func (s *SSH) drop(c *sshConn) {
	s.dropConn(c, errors.New("connection closed"))
}

// dropConn drops c as drop does, recording why as the reason the commands
// on c report.
func (s *SSH) dropConn(c *sshConn, why error) {
	s.mu.Lock()
	if s.conn == c {
		s.conn = nil
	}
	s.mu.Unlock()
	c.closeWith(why)
}

// Close closes the connection, if one is open.
func (s *SSH) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil
	}
	err := s.conn.client.Close()
	s.conn = nil
	return err
}
