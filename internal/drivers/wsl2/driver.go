package wsl2

import (
	"net/netip"
	"os"
	"sync"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/hyperv"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// Options configure the driver.
type Options struct {
	Dirs state.Dirs
	// Profile is the Windows user's profile directory, which holds
	// .wslconfig; empty is the home directory.
	Profile string
	// Runner runs wsl.exe; nil is this host's.
	Runner Runner
	// PowerShell runs the host's scripts (the route to the node); nil is
	// the session the Hyper-V drivers share.
	PowerShell hyperv.Runner
	// Warn receives what the driver could not check or do without
	// failing.
	Warn func(string)
	// Handle is the handle Node returns for a node; nil is one over
	// wsl.exe (tests of the cluster's steps give their own).
	Handle func(name string) *node.Node
}

// Driver runs a cluster's Linux control plane as a WSL2 distribution: a
// node is a distribution named hwk-NODE, imported from the node image's
// root file system tar into the node's directory beside hwk's marker
// (distro.go), and hwk touches no distribution without both. Commands run
// through wsl.exe (transport.go, wslexe.go).
type Driver struct {
	dirs    state.Dirs
	profile string
	r       Runner
	ps      hyperv.Runner
	warn    func(string)
	node    func(name string) *node.Node

	mu sync.Mutex
	// subnets are the node networks EnsureNetwork was given, by cluster.
	subnets map[string]netip.Prefix
}

var _ drivers.Driver = (*Driver)(nil)

// New makes the driver.
func New(o Options) *Driver {
	d := &Driver{dirs: o.Dirs, profile: o.Profile, r: o.Runner, ps: o.PowerShell, warn: o.Warn, node: o.Handle, subnets: map[string]netip.Prefix{}}
	if d.r == nil {
		d.r = CLI{}
	}
	if d.ps == nil {
		d.ps = hyperv.SharedSession()
	}
	if d.profile == "" {
		d.profile, _ = os.UserHomeDir()
	}
	if d.warn == nil {
		d.warn = func(string) {}
	}
	return d
}

// Name implements drivers.Driver.
func (d *Driver) Name() string { return config.DriverWSL2 }

// GuestOSes implements drivers.Driver.
func (d *Driver) GuestOSes() []config.OS { return config.DriverGuests(config.DriverWSL2) }

// Traits implements drivers.Traiter: the node is a distribution on WSL's
// kernel, on WSL's own switch, which the host routes to.
func (d *Driver) Traits() drivers.Traits {
	return drivers.Traits{SharesHostKernel: true, NeedsHostRoute: true}
}
