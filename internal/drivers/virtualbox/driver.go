package virtualbox

import (
	"context"
	"net/netip"
	"sync"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// BuildCommand is what makes the Linux node image this driver boots.
const BuildCommand = "hwk node-image build linux --formats vdi"

// Options configure a Driver.
type Options struct {
	// Dirs are hwk's directories: a cluster's directory holds its VMs'
	// disks, seeds, consoles and SSH identities; the cache the bases.
	Dirs state.Dirs
	// Runner runs VBoxManage; the host's when nil (one call at a time
	// in the whole process, whatever the driver).
	Runner Runner
	// Warn receives what an operation could not do but need not fail for.
	Warn func(string)
	// Force lets Preflight pass on a Windows whose hypervisor is on
	// (VirtualBox then runs on it, slowly), with a warning.
	Force bool
	// Hypervisor reports whether the Windows hypervisor runs; the host's
	// answer when nil.
	Hypervisor func(context.Context) (bool, error)
	// Handle reaches a node once VirtualBox reports it running; nil is SSH with
	// the cluster's key and the node's pinned host key, through the port
	// forwarded to its port 22. Tests give handles of their own.
	Handle func(name string, os config.OS, ip netip.Addr) (*node.Node, error)
}

// Driver is the VirtualBox driver.
type Driver struct {
	dirs       state.Dirs
	vbm        Runner
	warn       func(string)
	force      bool
	hypervisor func(context.Context) (bool, error)
	handle     func(name string, os config.OS, ip netip.Addr) (*node.Node, error)
	// mu serializes making a cluster's SSH key and a base's
	// registration.
	mu sync.Mutex
}

var (
	_ drivers.Driver          = (*Driver)(nil)
	_ drivers.ImageChecker    = (*Driver)(nil)
	_ drivers.SubnetChecker   = (*Driver)(nil)
	_ drivers.Autostarter     = (*Driver)(nil)
	_ drivers.Installer       = (*Driver)(nil)
	_ drivers.MemoryCommitter = (*Driver)(nil)
)

// New returns a VirtualBox driver.
func New(o Options) *Driver {
	if o.Runner == nil {
		o.Runner = &CLI{}
	}
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	if o.Hypervisor == nil {
		o.Hypervisor = hypervisorPresent
	}
	return &Driver{dirs: o.Dirs, vbm: o.Runner, warn: o.Warn, force: o.Force, hypervisor: o.Hypervisor, handle: o.Handle}
}

// Name implements drivers.Driver.
func (d *Driver) Name() string { return config.DriverVirtualBox }

// GuestOSes implements drivers.Driver.
func (d *Driver) GuestOSes() []config.OS { return config.DriverGuests(config.DriverVirtualBox) }
