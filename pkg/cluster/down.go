package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/kubeconfig"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster/internal/clusterdir"
)

// Down deletes the cluster called name: its machines (workers first, then
// the control plane), its network, its kubeconfig entries and its directory,
// also of a half-made cluster or one whose record is gone (it then asks every
// driver that works here). It reports whether there was anything to delete;
// a cluster that is not there is not an error.
func (p *Provider) Down(ctx context.Context, name string) (bool, error) {
	unlock, err := p.lock(name)
	if err != nil {
		return false, err
	}
	defer unlock()

	// A directory hwk did not make for this cluster stops down before
	// anything is deleted, machines and kubeconfig entries included.
	if err := p.store().CheckOwned(name); err != nil {
		return false, err
	}
	found, err := p.store().Exists(name)
	if err != nil {
		return false, err
	}
	dir, err := p.store().ClusterDir(name)
	if err != nil {
		return false, err
	}
	rec, err := clusterdir.ReadRecord(dir)
	if err != nil && !clusterdir.IsNotExist(err) {
		return false, err
	}
	ds, err := p.driversOf(ctx, rec)
	if err != nil {
		return found, err
	}
	for _, d := range ds {
		n, err := p.deleteMachines(ctx, d, name, rec)
		if err != nil {
			return true, err
		}
		found = found || n > 0
		if err := d.DeleteNetwork(ctx, name); err != nil {
			return true, err
		}
	}
	if _, err := kubeconfig.Get(p.KubeconfigPaths, name); err == nil {
		found = true
	}
	if err := kubeconfig.Remove(p.KubeconfigPaths, name); err != nil {
		return true, fmt.Errorf("remove %s from kubeconfig: %w", kubeconfig.ContextName(name), err)
	}
	if err := p.store().Remove(name); err != nil {
		return true, err
	}
	return found, nil
}

// driversOf returns the drivers that may hold the cluster's machines: those
// its record names (which must work, or the machines would stay), else
// every driver that works here.
func (p *Provider) driversOf(ctx context.Context, rec *config.Cluster) ([]drivers.Driver, error) {
	var out []drivers.Driver
	if rec != nil {
		for _, n := range rec.Nodes {
			if slices.ContainsFunc(out, func(d drivers.Driver) bool { return d.Name() == n.Driver }) {
				continue
			}
			d, err := p.Registry.Get(n.Driver)
			if err != nil {
				return nil, err
			}
			if _, err := drivers.Preflight(ctx, d); err != nil {
				return nil, fmt.Errorf("cannot reach the nodes of cluster %s on driver %s: %w", rec.Name, n.Driver, err)
			}
			out = append(out, d)
		}
		return out, nil
	}
	return p.Registry.Reachable(ctx), nil
}

// deleteMachines deletes every machine driver d holds for cluster, and
// every node the record puts on d (a machine whose create was cut short
// may not list). Workers go first, at once; then the control plane.
func (p *Provider) deleteMachines(ctx context.Context, d drivers.Driver, cluster string, rec *config.Cluster) (int, error) {
	ms, err := d.List(ctx, cluster)
	if err != nil {
		return 0, err
	}
	roles := map[string]config.Role{}
	for _, m := range ms {
		roles[m.Name] = m.Role
	}
	if rec != nil {
		for _, n := range rec.Nodes {
			if n.Driver == d.Name() {
				if _, ok := roles[n.Name]; !ok {
					roles[n.Name] = n.Role
				}
			}
		}
	}
	for _, role := range []config.Role{config.Worker, config.ControlPlane} {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for name, r := range roles {
			if r == config.ControlPlane != (role == config.ControlPlane) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := d.Delete(ctx, drivers.Ref{Cluster: cluster, Name: name}); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("delete node %s: %w", name, err))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return len(ms), err
		}
	}
	return len(ms), nil
}
