package docker

import (
	"runtime"
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
