package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster/internal/actions"
	"github.com/hwk-dev/hwk/pkg/node"
)

// Stop shuts the cluster's machines down, workers first (at once), then
// the control plane, so no worker outlives the API server it reports to.
// Nothing is deleted: addresses, disks and certificates stay, and Start
// brings the cluster back. Stopping a stopped cluster is not an error.
func (p *Provider) Stop(ctx context.Context, name string) error {
	unlock, err := p.lock(name)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := p.record(name)
	if err != nil {
		return err
	}
	ds, err := p.nodeDrivers(ctx, rec)
	if err != nil {
		return err
	}
	workers, cp := split(rec)
	stop := func(d drivers.Driver, r drivers.Ref, _ drivers.Machine) error {
		if err := d.Stop(ctx, r); err != nil {
			return err
		}
		// An autostart VM that hwk stop stopped must stay stopped when
		// the host restarts. Autostart is changed while the VM is off:
		// VirtualBox refuses to change a running VM's settings.
		if a, ok := d.(drivers.Autostarter); ok && rec.Autostart {
			return a.SetAutostart(ctx, r, false)
		}
		return nil
	}
	if err := p.stepOf(name, "Stopping the workers", func() error { return eachNode(ctx, rec, ds, workers, stop) }); err != nil {
		return err
	}
	return p.stepOf(name, "Stopping the control plane", func() error { return eachNode(ctx, rec, ds, cp, stop) })
}

// StartResult is how long Start took to each milestone.
type StartResult struct {
	APIReady, NodesReady time.Duration
}

// Start boots a stopped cluster: the control plane first, then (once the
// API server answers) the workers, and waits until every node's kubelet
// has reported Ready since the start and the system pods are Ready (on
// the docker nodes it booted, started again since). Starting a running
// cluster only waits.
func (p *Provider) Start(ctx context.Context, name string, t Timeouts) (*StartResult, error) {
	unlock, err := p.lock(name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := p.record(name)
	if err != nil {
		return nil, err
	}
	t = withDefaults(t)
	cs, err := p.client(name)
	if err != nil {
		return nil, err
	}
	ds, err := p.nodeDrivers(ctx, rec)
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		if e, ok := d.(drivers.Emulator); ok && e.Emulated() {
			// As up does: an emulated VM boots and settles many times
			// slower.
			t = Timeouts(actions.Timeouts(t).Scale(actions.EmulationSlowdown))
			break
		}
	}
	began := time.Now()
	var skew time.Duration // the API server's clock against this host's
	res := &StartResult{}
	workers, cp := split(rec)
	// The nodes on the engine's clock this start boots: their pods must
	// start again before they count (bootstrap.WaitWorkloadsSince). Only
	// stopped ones: a saved or paused VM resumes without restarting
	// anything. Only those on the API server's clock (the times are
	// compared on it, below): a VM's may run behind after boot until its
	// time sync catches up, and a start time from it would never count.
	var (
		mu     sync.Mutex
		booted []string
	)
	start := func(d drivers.Driver, r drivers.Ref, m drivers.Machine) error {
		if m.State == drivers.StateStopped && drivers.TraitsOf(d).EngineClock {
			mu.Lock()
			booted = append(booted, r.Name)
			mu.Unlock()
		}
		// Before the VM runs, for the reason stop gives.
		if a, ok := d.(drivers.Autostarter); ok && rec.Autostart {
			if err := a.SetAutostart(ctx, r, true); err != nil {
				return err
			}
		}
		return d.Start(ctx, r)
	}
	if err := p.stepOf(name, "Starting the control plane", func() error {
		if err := eachNode(ctx, rec, ds, cp, start); err != nil {
			return err
		}
		if err := bootstrap.WaitAPIServer(ctx, cs, t.APIServer); err != nil {
			return err
		}
		res.APIReady = time.Since(began)
		// The nodes' heartbeats and pods' start times are on the nodes'
		// clock, which may be behind this host's (a Docker Desktop VM
		// after the laptop slept): "since the start" is taken on the API
		// server's clock.
		if d, err := bootstrap.ClockSkew(ctx, cs); err == nil {
			skew = d
		} else if p.Log != nil {
			p.Log.Warn(err.Error() + "; taking this host's clock for the node's")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if len(workers) > 0 {
		if err := p.stepOf(name, "Starting the workers", func() error { return eachNode(ctx, rec, ds, workers, start) }); err != nil {
			return nil, err
		}
	}
	names := make([]string, len(rec.Nodes))
	for i, n := range rec.Nodes {
		names[i] = n.Name
	}
	if err := p.stepOf(name, "Waiting for nodes and system pods to be Ready", func() error {
		// Two seconds of slack: the server's clock is read in whole
		// seconds, and a node's clock may be a little behind it.
		since := began.Add(skew).Add(-2 * time.Second)
		err := bootstrap.WaitNodesReadySince(ctx, cs, t.NodesReady, since, names...)
		if err == nil {
			res.NodesReady = time.Since(began)
			err = bootstrap.WaitWorkloadsSince(ctx, cs, t.Pods, since, booted, bootstrap.SystemWorkloads(rec.HasWindows())...)
		}
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("%w\n  the machines are running; `hwk status --name %s` shows what is not Ready", err, name)
		}
		return err
	}); err != nil {
		return nil, err
	}
	return res, nil
}

// nodeDrivers returns the drivers of the record's nodes by name, each
// checked to work here (driversOf, as down uses them).
func (p *Provider) nodeDrivers(ctx context.Context, rec *config.Cluster) (map[string]drivers.Driver, error) {
	list, err := p.driversOf(ctx, rec)
	if err != nil {
		return nil, err
	}
	out := map[string]drivers.Driver{}
	for _, d := range list {
		out[d.Name()] = d
	}
	return out, nil
}

// split parts the record's nodes into workers and the control plane.
func split(rec *config.Cluster) (workers, cp []config.Node) {
	for _, n := range rec.Nodes {
		if n.Role == config.ControlPlane {
			cp = append(cp, n)
		} else {
			workers = append(workers, n)
		}
	}
	return workers, cp
}

// eachNode runs fn on every node at once, each with its driver from ds
// and its machine as the driver sees it, and joins the errors.
func eachNode(ctx context.Context, rec *config.Cluster, ds map[string]drivers.Driver, nodes []config.Node, fn func(drivers.Driver, drivers.Ref, drivers.Machine) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := drivers.Ref{Cluster: rec.Name, Name: n.Name}
			m, err := ds[n.Driver].Inspect(ctx, r)
			if err == nil && m.State == drivers.StateMissing {
				err = fmt.Errorf("its machine is gone\n  fix: `hwk down --name %s`, then up again", rec.Name)
			}
			if err == nil {
				err = fn(ds[n.Driver], r, m)
			}
			if err != nil {
				errs[i] = fmt.Errorf("node %s: %w", n.Name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(slices.DeleteFunc(errs, func(e error) bool { return e == nil })...)
}

// stepOf runs one step of stop or start; a failure is a *StepError, whose
// details the step line has shown.
func (p *Provider) stepOf(cluster, step string, fn func() error) error {
	if err := p.step(step, fn); err != nil {
		return &StepError{Step: step, Cluster: cluster, Err: err, Interrupted: errors.Is(err, context.Canceled)}
	}
	return nil
}

// Node returns a handle for running commands on one of the cluster's nodes,
// and the node as the cluster's record has it. The machine must be
// running.
func (p *Provider) Node(ctx context.Context, cluster, name string) (*node.Node, config.Node, error) {
	rec, err := p.record(cluster)
	if err != nil {
		return nil, config.Node{}, err
	}
	i := slices.IndexFunc(rec.Nodes, func(n config.Node) bool { return n.Name == name })
	if i < 0 {
		names := make([]string, len(rec.Nodes))
		for j, n := range rec.Nodes {
			names[j] = n.Name
		}
		return nil, config.Node{}, fmt.Errorf("cluster %s has no node %s; its nodes are %s", cluster, name, strings.Join(names, ", "))
	}
	n := rec.Nodes[i]
	d, err := p.Registry.Get(n.Driver)
	if err != nil {
		return nil, n, err
	}
	ref := drivers.Ref{Cluster: cluster, Name: name}
	m, err := d.Inspect(ctx, ref)
	if err != nil {
		return nil, n, fmt.Errorf("node %s: %w", name, err)
	}
	switch m.State {
	case drivers.StateRunning:
	case drivers.StateMissing:
		return nil, n, fmt.Errorf("node %s has no machine (its up did not get that far, or it was deleted)\n  fix: `hwk up --recreate --name %s`", name, cluster)
	default:
		return nil, n, fmt.Errorf("node %s is %s\n  fix: `hwk start --name %s`", name, m.State, cluster)
	}
	h, err := d.Node(ctx, ref)
	if err != nil {
		return nil, n, fmt.Errorf("node %s: %w", name, err)
	}
	return h, n, nil
}
