// Package docker runs Linux nodes as containers of a Docker Engine, through
// the engine's API (github.com/moby/moby/client). A node container boots
// systemd and runs containerd and nested containers, so it behaves like the
// Linux VM the other drivers make.
package docker

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Labels on everything the driver makes, so a cluster's objects can be
// found (and removed) without any record on disk.
const (
	LabelCluster    = "hwk.dev/cluster"
	LabelNode       = "hwk.dev/node"
	LabelRole       = "hwk.dev/role"
	LabelOS         = "hwk.dev/os"
	LabelPrivileged = "hwk.dev/privileged"
	// LabelProbeFor marks the short-lived container that learns whether
	// the engine starts privileged ones, with the cluster whose up made
	// it: a killed up leaves it behind, and that cluster's down removes it.
	LabelProbeFor = "hwk.dev/probe-for"
)

// BuildCommand is what makes the Linux node image for this driver.
const BuildCommand = "hwk node-image build linux --formats docker"

// Driver is the docker driver. Its zero value is not usable; call New.
type Driver struct {
	opts   []client.Opt
	hostOS string
	extra  map[string]string

	mu  sync.Mutex
	cli *client.Client
	// privileged is learned once per engine: nil until a node is made.
	privileged *bool
}

var _ drivers.Driver = (*Driver)(nil)

// New returns a driver for the engine the environment names (DOCKER_HOST
// and friends, else the platform's default socket or pipe). opts replace
// that choice, for tests.
func New(opts ...client.Opt) *Driver {
	if len(opts) == 0 {
		opts = []client.Opt{client.FromEnv}
	}
	return &Driver{opts: opts, hostOS: runtime.GOOS}
}

// WithLabels puts labels on every container and volume the driver makes,
// beside hwk's own, for tools that find containers by label (kind finds
// its nodes by io.x-k8s.kind.cluster; hwk's load benchmark uses that).
// hwk's own labels win where names clash.
func (d *Driver) WithLabels(l map[string]string) *Driver {
	d.extra = l
	return d
}

// Name implements drivers.Driver.
func (d *Driver) Name() string { return config.DriverDocker }

// GuestOSes implements drivers.Driver: containers share the engine's Linux
// kernel, so Linux only.
func (d *Driver) GuestOSes() []config.OS { return config.DriverGuests(config.DriverDocker) }

// Traits implements drivers.Traiter: nodes are containers on the
// engine's kernel and clock, the API server published on loopback.
func (d *Driver) Traits() drivers.Traits {
	return drivers.Traits{SharesHostKernel: true, APIOnLoopback: true, EngineClock: true}
}

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

// Preflight implements drivers.Driver.
func (d *Driver) Preflight(ctx context.Context) (string, error) {
	c, err := d.client()
	if err != nil {
		return "", err
	}
	drivers.Waiting(ctx, "the Docker engine at "+c.DaemonHost())
	info, err := c.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", d.wrap(c, err)
	}
	if info.Info.OSType != "" && info.Info.OSType != "linux" {
		return "", &drivers.UnavailableError{
			Driver: config.DriverDocker,
			Reason: fmt.Sprintf("the Docker engine runs %s containers; hwk's docker driver needs Linux containers", info.Info.OSType),
			Fix:    `switch Docker Desktop to Linux containers (tray icon → "Switch to Linux containers...")`,
		}
	}
	cg := info.Info.CgroupVersion
	if cg == "" {
		cg = "1"
	}
	return fmt.Sprintf("Docker Engine %s (API %s), %s/%s, cgroup v%s", info.Info.ServerVersion, c.ClientVersion(), info.Info.OSType, info.Info.Architecture, cg), nil
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
