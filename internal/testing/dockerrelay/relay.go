// Package dockerrelay forwards a loopback TCP port to the Docker
// engine's Unix socket, so that hwk's Windows programs under Wine reach
// the engine as they would reach Docker Desktop's tcp://localhost:2375
// (Wine gives Windows programs no AF_UNIX sockets). The engine is not
// reconfigured, and the relay is the test's own goroutines, gone with
// Close.
package dockerrelay

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// Relay is a listening relay.
type Relay struct {
	ln     net.Listener
	socket string
	wg     sync.WaitGroup
}

// Start starts a relay to the engine this host's docker CLI would use
// (DOCKER_HOST=unix://..., else /var/run/docker.sock), or returns nil when
// nothing listens there.
func Start() (*Relay, error) {
	socket := "/var/run/docker.sock"
	if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok {
		socket = h
	}
	c, err := net.DialTimeout("unix", socket, 2*time.Second)
	if err != nil {
		return nil, nil
	}
	c.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Relay{ln: ln, socket: socket}
	r.wg.Go(r.serve)
	return r, nil
}

// Socket is the engine's socket.
func (r *Relay) Socket() string { return r.socket }

// Host is the DOCKER_HOST that reaches the engine through the relay.
func (r *Relay) Host() string { return "tcp://" + r.ln.Addr().String() }

func (r *Relay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Go(func() { r.relay(c) })
	}
}

func (r *Relay) relay(c net.Conn) {
	defer c.Close()
	var d net.Dialer
	e, err := d.DialContext(context.Background(), "unix", r.socket)
	if err != nil {
		return
	}
	defer e.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(e, c); e.(*net.UnixConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(c, e); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	<-done
	<-done
}

// Close stops accepting; connections still open end with their peers.
func (r *Relay) Close() error { return r.ln.Close() }
