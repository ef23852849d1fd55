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

// SSHConfig says how to reach a node over SSH.
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
}

// SSH is a Transport over one SSH connection, opened on first use and
// shared by every command (one session each).
type SSH struct {
	cfg SSHConfig

	mu     sync.Mutex
	client *ssh.Client
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
	return &SSH{cfg: cfg}, nil
}

func (s *SSH) connect(ctx context.Context) (*ssh.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		return s.client, nil
	}
	conf := &ssh.ClientConfig{
		User:              s.cfg.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(s.cfg.Key)},
		HostKeyCallback:   ssh.FixedHostKey(s.cfg.HostKey),
		HostKeyAlgorithms: []string{s.cfg.HostKey.Type()},
		Timeout:           s.cfg.DialTimeout,
	}
	d := net.Dialer{Timeout: s.cfg.DialTimeout}
	conn, err := d.DialContext(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", s.cfg.Addr, err)
	}
	// The handshake has no context of its own; a deadline bounds it.
	_ = conn.SetDeadline(time.Now().Add(s.cfg.DialTimeout))
	c, chans, reqs, err := ssh.NewClientConn(conn, s.cfg.Addr, conf)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ssh %s: %w", s.cfg.Addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	s.client = ssh.NewClient(c, chans, reqs)
	return s.client, nil
}

// Connect implements Connector: it dials and completes the handshake,
// which fails unless the server holds the pinned host key.
func (s *SSH) Connect(ctx context.Context) error {
	_, err := s.connect(ctx)
	return err
}

// Run implements Transport.
func (s *SSH) Run(ctx context.Context, cmd Cmd) error {
	client, err := s.connect(ctx)
	if err != nil {
		return err
	}
	sess, err := client.NewSession()
	if err != nil {
		// A dropped connection: forget it so the next call redials.
		s.drop(client)
		return fmt.Errorf("ssh %s: open session: %w", s.cfg.Addr, err)
	}
	defer sess.Close()
	sess.Stdout, sess.Stderr = cmd.Stdout, cmd.Stderr
	if cmd.Stdin != nil {
		// Not sess.Stdin: Wait would then also wait for the caller's reader
		// to reach EOF, even after the command has exited.
		in, err := sess.StdinPipe()
		if err != nil {
			return fmt.Errorf("ssh %s: %w", s.cfg.Addr, err)
		}
		go func() {
			_, _ = io.Copy(in, cmd.Stdin)
			in.Close()
		}()
	}
	if cmd.TTY != nil {
		modes := ssh.TerminalModes{ssh.ECHO: 1, ssh.TTY_OP_ISPEED: 38400, ssh.TTY_OP_OSPEED: 38400}
		if err := sess.RequestPty("xterm-256color", int(cmd.TTY.Rows), int(cmd.TTY.Cols), modes); err != nil {
			return fmt.Errorf("ssh %s: request a terminal: %w", s.cfg.Addr, err)
		}
	}
	if err := sess.Start(Quote(s.cfg.Shell, cmd.Args...)); err != nil {
		return fmt.Errorf("ssh %s: start: %w", s.cfg.Addr, err)
	}
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
	var missing *ssh.ExitMissingError
	if errors.As(err, &missing) {
		return fmt.Errorf("ssh %s: the command ended without an exit status (connection lost?)", s.cfg.Addr)
	}
	if err != nil {
		return fmt.Errorf("ssh %s: %w", s.cfg.Addr, err)
	}
	return nil
}

func (s *SSH) drop(c *ssh.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == c {
		s.client.Close()
		s.client = nil
	}
}

// Close closes the connection, if one is open.
func (s *SSH) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		return nil
	}
	err := s.client.Close()
	s.client = nil
	return err
}
