package wsl2

import (
	"context"
	"fmt"
	"io/fs"
	"net/netip"
	"path/filepath"
	"slices"
	"time"

	"github.com/hwk-dev/hwk/drivers"
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

// make imports and sets up the node's distribution; imported reports that
// a Create cut short already imported it.
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
		// Nothing except the distribution was made: leave nothing.
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

// portsFree returns an error naming the ports of ports that something in
// WSL's network listens on.
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
// which boots the distribution (systemd first, as wsl.conf sets) if it is
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
