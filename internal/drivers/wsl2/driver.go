package wsl2

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/hyperv"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// kubeletPort is the kubelet's, which must be free in WSL's network.
const kubeletPort = 10250

// keepalive is the session that keeps a node's distribution running: WSL
// stops a distribution soon after its last wsl.exe session ends, systemd
// or not (microsoft/WSL#8854). Its last word names it for pgrep.
var keepalive = []string{"/bin/sh", "-c", "while :; do sleep 3600; done", "hwk-keepalive"}

// startTimeout bounds the wait for a started distribution to be listed as
// running.
const startTimeout = time.Minute

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

// Driver runs a cluster's Linux control plane as a WSL2 distribution.
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

// Limits implements drivers.Experimental.
func (d *Driver) Limits() string {
	return "never run on a real WSL2 yet; the control plane only, with Windows workers on hyperv; NAT networking mode; one WSL node per host; an elevated terminal to route the node's address (again after WSL or Windows restarts: hwk start)"
}

// clustersDir holds every cluster's directory.
func (d *Driver) clustersDir() string {
	return state.NewStore(d.dirs).ClustersDir()
}

// nodeDir is where a node's distribution lives: its disk and hwk's marker.
func (d *Driver) nodeDir(r drivers.Ref) string {
	return filepath.Join(state.NewStore(d.dirs).DriverDir(r.Cluster, "wsl2"), r.Name)
}

func (d *Driver) distros() distros { return distros{r: d.r, dir: d.nodeDir} }

func (d *Driver) facts(ctx context.Context) (hostFacts, error) {
	f, err := gatherFacts(ctx, d.r, d.profile, d.clustersDir())
	switch {
	case errors.Is(err, errInWSL):
		return f, unavailable(err.Error(), "run hwk.exe from Windows (PowerShell or cmd)")
	case errors.Is(err, errNoWSL) && runtime.GOOS != "windows":
		return f, unavailable("WSL2 is Windows'; this is "+runtime.GOOS, "use the docker or libvirt driver on Linux, virtualbox on macOS")
	case errors.Is(err, errNoWSL):
		return f, unavailable("wsl.exe was not found: WSL is not installed (it needs Windows 10 2004 or later)",
			"run `wsl --install --no-distribution` as administrator, then restart Windows")
	case isCode(err, "WSL_E_WSL_OPTIONAL_COMPONENT_REQUIRED"):
		return f, unavailable("the Windows Subsystem for Linux optional component is off, or waits for a restart of Windows",
			"run `wsl --install --no-distribution` as administrator, then restart Windows")
	}
	var we *Error
	if errors.As(err, &we) {
		return f, unavailable(err.Error(), "`wsl --status` says what WSL needs; `wsl --update` brings it up to date")
	}
	return f, err
}

// Preflight implements drivers.Driver: wsl.exe of WSL 2.0 or newer, all
// that removing nodes needs.
func (d *Driver) Preflight(ctx context.Context) (string, error) {
	drivers.Waiting(ctx, "wsl.exe and the WSL distribution's answers")
	f, err := d.facts(ctx)
	if err != nil {
		return "", err
	}
	return judgeWSL(f)
}

// CheckUp implements drivers.UpChecker: NAT mode with localhost
// forwarding, which making and running a node needs.
func (d *Driver) CheckUp(ctx context.Context) error {
	f, err := d.facts(ctx)
	if err != nil {
		return err
	}
	_, err = judgeHost(f)
	return err
}

// EnsureNetwork implements drivers.Driver. WSL's network is WSL's; the
// driver keeps the cluster's node network for the nodes it makes, which
// route it through the host.
func (d *Driver) EnsureNetwork(_ context.Context, n drivers.Network) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.subnets[n.Cluster] = n.Subnet
	return nil
}

// DeleteNetwork implements drivers.Driver: there is nothing of the
// cluster's in WSL's network once its node is gone.
func (d *Driver) DeleteNetwork(_ context.Context, cluster string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.subnets, cluster)
	return nil
}

// Create implements drivers.Driver: it imports the node image's root file
// system as the node's distribution, checks WSL's kernel and network from
// inside it, sets it up as a node (setup), and stops it so that its next
// start boots systemd.
func (d *Driver) Create(ctx context.Context, spec drivers.MachineSpec) error {
	if spec.OS != config.Linux {
		return fmt.Errorf("create node %s: the wsl2 driver runs Linux nodes only, not %s; use hyperv or virtualbox for Windows nodes", spec.Name, spec.OS)
	}
	if spec.Role != config.ControlPlane {
		return fmt.Errorf("create node %s: the wsl2 driver runs a cluster's control plane only (all WSL distributions share one VM and one network, so a host has one hwk WSL node); put %s on hyperv", spec.Name, spec.Name)
	}
	d.mu.Lock()
	subnet, ok := d.subnets[spec.Cluster]
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("create node %s: cluster %s's network was not set up first", spec.Name, spec.Cluster)
	}
	ds := d.distros()
	registered, _, err := ds.state(ctx, spec.Ref)
	if err != nil {
		return fmt.Errorf("create node %s: %w", spec.Name, err)
	}
	mk := ds.mark(spec.Ref)
	if !registered || mk == nil || !mk.Ready {
		if err := d.make(ctx, spec, subnet, registered && mk != nil); err != nil {
			return err
		}
	}
	if spec.Start {
		return d.Start(ctx, spec.Ref)
	}
	return nil
}

// make imports and sets up the node's distribution; imported says a
// Create cut short already imported it.
func (d *Driver) make(ctx context.Context, spec drivers.MachineSpec, subnet netip.Prefix, imported bool) error {
	ds := d.distros()
	if !imported {
		f, err := d.facts(ctx)
		if err != nil {
			return fmt.Errorf("create node %s: %w", spec.Name, err)
		}
		if _, err := judgeHost(f); err != nil {
			return fmt.Errorf("create node %s: %w", spec.Name, err)
		}
		var busy []uint16
		for _, p := range spec.Ports {
			if portTaken(p) {
				busy = append(busy, p)
			}
		}
		if err := judgeNode(f, spec.Cluster, spec.MemoryBytes, busy); err != nil {
			return fmt.Errorf("create node %s: %w", spec.Name, err)
		}
		if err := ds.ensure(ctx, spec.Ref, spec.Image, marker{Role: spec.Role, IP: spec.IP, Subnet: subnet.Masked()}); err != nil {
			return err
		}
	}
	n := d.handle(spec.Ref)
	// The image's own init runs until setup is done and the distribution
	// restarted: the checks see WSL's kernel and its one network as the
	// node will, before any of the node's services listen.
	root, err := nodeFacts(ctx, n)
	if err != nil {
		return fmt.Errorf("create node %s: %w", spec.Name, err)
	}
	rep, err := checkKernel(root)
	if err != nil {
		return fmt.Errorf("create node %s: check WSL's kernel: %w", spec.Name, err)
	}
	warnings, verr := rep.verdict()
	for _, w := range warnings {
		d.warn(fmt.Sprintf("node %s: %s", spec.Name, w))
	}
	if verr == nil {
		verr = portsFree(root, append(slices.Clone(spec.Ports), kubeletPort))
	}
	if verr != nil {
		// Nothing but the distribution was made: leave nothing.
		if err := ds.remove(context.WithoutCancel(ctx), spec.Ref); err != nil {
			d.warn(err.Error())
		}
		return fmt.Errorf("create node %s: %w", spec.Name, verr)
	}
	if err := setup(ctx, n, spec, subnet); err != nil {
		return err
	}
	if err := ds.stop(ctx, spec.Ref); err != nil {
		return fmt.Errorf("create node %s: restart into systemd: %w", spec.Name, err)
	}
	return ds.setReady(spec.Ref)
}

// portsFree refuses ports that something in WSL's network listens on.
func portsFree(root fs.FS, ports []uint16) error {
	taken := listening(root)
	var busy []uint16
	for _, p := range ports {
		if taken[p] {
			busy = append(busy, p)
		}
	}
	return portsTaken(busy)
}

// Start implements drivers.Driver: it attaches the keepalive session,
// which boots the distribution (systemd first, as wsl.conf says) if it is
// not running, waits for WSL to list it as running, and has the host
// route the node's address to WSL's VM at its new address.
func (d *Driver) Start(ctx context.Context, r drivers.Ref) error {
	ds := d.distros()
	mk := ds.mark(r)
	if mk == nil {
		return fmt.Errorf("start node %s: cluster %s has no WSL node %s", r.Name, r.Cluster, r.Name)
	}
	registered, running, err := ds.state(ctx, r)
	switch {
	case err != nil:
		return fmt.Errorf("start node %s: %w", r.Name, err)
	case !registered:
		return fmt.Errorf("start node %s: its WSL distribution %s is gone (unregistered outside hwk); `hwk down` and `hwk up` again", r.Name, DistroName(r.Name))
	case running && d.kept(ctx, r):
		return nil
	}
	args := append([]string{"-d", DistroName(r.Name), "-u", "root", "-e"}, keepalive...)
	if err := d.r.Spawn(args...); err != nil {
		return fmt.Errorf("start node %s: %w", r.Name, err)
	}
	deadline := time.Now().Add(startTimeout)
	for {
		_, running, err := ds.state(ctx, r)
		if err != nil {
			return err
		}
		if running {
			return d.route(ctx, r, mk)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("start node %s: WSL did not list %s as running within %s; see `wsl.exe --list --verbose`", r.Name, DistroName(r.Name), startTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// kept reports whether the keepalive session runs in r's distribution.
func (d *Driver) kept(ctx context.Context, r drivers.Ref) bool {
	return d.handle(r).Run(ctx, node.Cmd{Args: []string{"pgrep", "-f", keepalive[len(keepalive)-1]}}) == nil
}

// Stop implements drivers.Driver. WSL has no graceful stop of one
// distribution: --terminate ends it at once, as a VM's power-off would.
func (d *Driver) Stop(ctx context.Context, r drivers.Ref) error {
	if d.distros().mark(r) == nil {
		return nil
	}
	if err := d.distros().stop(ctx, r); err != nil {
		return fmt.Errorf("stop node %s: %w", r.Name, err)
	}
	return nil
}

// Delete implements drivers.Driver: the host's route to the node, then
// the distribution and its files.
func (d *Driver) Delete(ctx context.Context, r drivers.Ref) error {
	if mk := d.distros().mark(r); mk != nil {
		d.unroute(ctx, r, mk)
	}
	return d.distros().remove(ctx, r)
}

// Inspect implements drivers.Driver.
func (d *Driver) Inspect(ctx context.Context, r drivers.Ref) (drivers.Machine, error) {
	m := drivers.Machine{Ref: r, OS: config.Linux, State: drivers.StateMissing}
	ds := d.distros()
	mk := ds.mark(r)
	if mk == nil {
		return m, nil
	}
	registered, running, err := ds.state(ctx, r)
	if err != nil {
		return m, fmt.Errorf("inspect node %s: %w", r.Name, err)
	}
	m.Role, m.IP = mk.Role, mk.IP
	switch {
	case !registered:
		// Unregistered by hand: only hwk's files are left, which
		// Delete removes.
	case running:
		m.State = drivers.StateRunning
	default:
		m.State = drivers.StateStopped
	}
	return m, nil
}

// List implements drivers.Driver: the nodes whose markers are in the
// cluster's directory.
func (d *Driver) List(ctx context.Context, cluster string) ([]drivers.Machine, error) {
	dirs, _ := filepath.Glob(filepath.Join(state.NewStore(d.dirs).DriverDir(cluster, "wsl2"), "*", markerFile))
	var out []drivers.Machine
	for _, p := range dirs {
		m, err := d.Inspect(ctx, drivers.Ref{Cluster: cluster, Name: filepath.Base(filepath.Dir(p))})
		if err != nil {
			return nil, err
		}
		if m.State != drivers.StateMissing || m.IP.IsValid() {
			out = append(out, m)
		}
	}
	return out, nil
}

// HostEndpoint implements drivers.Driver: WSL forwards the host's
// loopback ports to its VM in NAT mode (localhostForwarding, which
// Preflight requires).
func (d *Driver) HostEndpoint(_ context.Context, _ drivers.Ref, port uint16) (netip.AddrPort, error) {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), nil
}

// Node implements drivers.Driver.
func (d *Driver) Node(_ context.Context, r drivers.Ref) (*node.Node, error) {
	if d.node != nil {
		return d.node(r.Name), nil
	}
	return d.handle(r), nil
}

func (d *Driver) handle(r drivers.Ref) *node.Node {
	return node.New(r.Name, config.Linux, transport{r: d.r, distro: DistroName(r.Name)})
}
