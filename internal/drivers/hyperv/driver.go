package hyperv

import (
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// BuildCommand is what makes the Linux node image this driver boots.
const BuildCommand = "hwk node-image build linux --formats vhdx"

// Options configure a Driver.
type Options struct {
	// Dirs are hwk's directories; a cluster's directory holds its VMs'
	// disks, seeds and SSH identities.
	Dirs state.Dirs
	// Runner runs the scripts; the process-wide Session when nil.
	Runner Runner
	// Warn receives what an operation could not do but need not fail
	// for (hwk's NAT kept because removing it needs elevation).
	Warn func(string)
	// Handle reaches a node once Hyper-V has confirmed its address; nil
	// is SSH with the cluster's key and the node's pinned host key. Tests
	// give handles of their own, to run the driver's VM side for real
	// without a guest behind it.
	Handle func(name string, os config.OS, ip netip.Addr) (*node.Node, error)
}

// Driver is the Hyper-V driver.
type Driver struct {
	dirs   state.Dirs
	ps     Runner
	warn   func(string)
	handle func(name string, os config.OS, ip netip.Addr) (*node.Node, error)
	// mu serializes making a cluster's SSH key.
	mu sync.Mutex
	// adapterWait bounds the wait for the IPv4 interface of the host's
	// adapter to a new switch; it is asked again every adapterPoll.
	adapterWait, adapterPoll time.Duration
	// openPipe opens a VM's COM1 pipe, again every pipePoll until it can.
	openPipe func(string) (io.ReadCloser, error)
	pipePoll time.Duration
}

var (
	_ drivers.Driver          = (*Driver)(nil)
	_ drivers.ImageChecker    = (*Driver)(nil)
	_ drivers.Installer       = (*Driver)(nil)
	_ drivers.MemoryCommitter = (*Driver)(nil)
)

// New returns a Hyper-V driver.
func New(o Options) *Driver {
	if o.Runner == nil {
		o.Runner = shared
	}
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	return &Driver{dirs: o.Dirs, ps: o.Runner, warn: o.Warn, handle: o.Handle, adapterWait: adapterTimeout, adapterPoll: 500 * time.Millisecond,
		openPipe: openNamedPipe, pipePoll: 500 * time.Millisecond}
}

// Name implements drivers.Driver.
func (d *Driver) Name() string { return config.DriverHyperV }

// GuestOSes implements drivers.Driver.
func (d *Driver) GuestOSes() []config.OS { return config.DriverGuests(config.DriverHyperV) }
