package docker

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// client returns the engine's client, made at first use.
func (d *Driver) client() (*client.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cli != nil {
		return d.cli, nil
	}
	c, err := client.New(d.opts...)
	if err != nil {
		return nil, &drivers.UnavailableError{
			Driver: config.DriverDocker,
			Reason: fmt.Sprintf("bad Docker client settings: %v", err),
			Fix:    "check DOCKER_HOST, DOCKER_API_VERSION and DOCKER_CERT_PATH",
		}
	}
	d.cli = c
	return c, nil
}

// wrap turns the client's connection failures into UnavailableError with
// the fix for this host, and leaves other errors alone.
func (d *Driver) wrap(c *client.Client, err error) error {
	if err == nil || !client.IsErrConnectionFailed(err) {
		return err
	}
	host := c.DaemonHost()
	if strings.Contains(err.Error(), "permission denied") {
		fix := "add yourself to the docker group: `sudo usermod -aG docker $USER`, then log out and in (or run `newgrp docker`)"
		if d.hostOS == "windows" {
			fix = "run hwk from a terminal started as Administrator, or add your account to the docker-users group and sign in again"
		}
		return &drivers.UnavailableError{
			Driver: config.DriverDocker,
			Reason: fmt.Sprintf("permission denied on the Docker socket %s", host),
			Fix:    fix,
		}
	}
	fix := "start the Docker engine: `sudo systemctl start docker` (or run `dockerd` in another terminal)"
	if d.hostOS == "windows" || d.hostOS == "darwin" {
		fix = "start Docker Desktop and wait until it says the engine is running"
	}
	if strings.HasPrefix(host, "tcp://") || strings.HasPrefix(host, "ssh://") {
		fix = fmt.Sprintf("check that the engine at %s is up, or unset DOCKER_HOST to use the local one", host)
	}
	return &drivers.UnavailableError{
		Driver: config.DriverDocker,
		Reason: fmt.Sprintf("cannot reach a Docker engine at %s", host),
		Fix:    fix,
	}
}

// localEngine reports whether the engine runs on this host, where its
// interfaces are ours to inspect and its loopback ports are ours: a Unix
// socket, a named pipe (Docker Desktop), or TCP on a loopback address
// (Docker Desktop's "Expose daemon on tcp://localhost:2375", a relay to
// the engine's socket).
func (d *Driver) localEngine(c *client.Client) bool {
	h := c.DaemonHost()
	if strings.HasPrefix(h, "unix://") || strings.HasPrefix(h, "npipe://") {
		return true
	}
	u, err := url.Parse(h)
	if err != nil || u.Scheme != "tcp" {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(u.Hostname())
	return err == nil && ip.IsLoopback()
}
