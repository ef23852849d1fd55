package actions

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster/internal/clusterdir"
)

// subnetLockWait is how long up waits for another hwk choosing a subnet.
const subnetLockWait = 30 * time.Second

// chooseSubnet settles the cluster's node subnet before anything is made,
// and reserves it. A subnet the config names is checked; otherwise the
// first /24 of config.NodeSubnetCandidates that no other cluster, driver
// network or host interface overlaps is taken, and the nodes' addresses
// move with it.
func (c *Context) chooseSubnet(ctx context.Context) error {
	lock, err := c.Store.LockSubnets(subnetLockWait)
	if err != nil {
		return err
	}
	defer lock.Release()
	p, err := c.findSubnet(ctx)
	if err != nil {
		return err
	}
	if c.Config.AutoNodeSubnet() {
		c.Config.SetNodeSubnet(p)
	}
	return c.Store.ReserveSubnet(c.Config.Name, p)
}

// FindSubnet returns the subnet up would choose for the cluster now (or the
// config's, checked), without reserving it: for hwk doctor, which leaves
// nothing behind. Drivers must hold the node's drivers.
func FindSubnet(ctx context.Context, c *Context) (netip.Prefix, error) {
	lock, err := c.Store.LockSubnets(subnetLockWait)
	if err != nil {
		return netip.Prefix{}, err
	}
	defer c.Store.UnlockSubnets(lock)
	return c.findSubnet(ctx)
}

// findSubnet checks the config's subnet, or finds the first free
// candidate; the caller holds the subnets lock.
func (c *Context) findSubnet(ctx context.Context) (netip.Prefix, error) {
	cfg := c.Config
	others, err := c.otherSubnets()
	if err != nil {
		return netip.Prefix{}, err
	}
	if !cfg.AutoNodeSubnet() {
		p, err := netip.ParsePrefix(cfg.Networking.NodeSubnet)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("networking.nodeSubnet: %w", err)
		}
		return p.Masked(), c.checkSubnet(ctx, p.Masked(), others, false)
	}
	for _, p := range config.NodeSubnetCandidates() {
		err := c.checkSubnet(ctx, p, others, true)
		var inUse *drivers.SubnetInUseError
		if errors.As(err, &inUse) {
			continue
		}
		if err != nil {
			return netip.Prefix{}, err
		}
		return p, nil
	}
	return netip.Prefix{}, fmt.Errorf("no /24 in %s is free for the node network (other clusters, networks or host interfaces use them all)\n  fix: set networking.nodeSubnet in the cluster config to a free range, or delete clusters you no longer need (`hwk get clusters`)", config.NodeSubnetRange)
}

// otherSubnets returns the node subnets of the other clusters on this host:
// those reserved, and those in records older hwk versions wrote.
func (c *Context) otherSubnets() (map[string]netip.Prefix, error) {
	out, err := c.Store.Subnets()
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = map[string]netip.Prefix{}
	}
	names, err := c.Store.List()
	if err != nil {
		return nil, err
	}
	// A reservation without a cluster directory is an up in progress, if
	// that up still holds the cluster's lock; else what a killed up left,
	// which holds nothing back.
	for n := range out {
		if slices.Contains(names, n) || n == c.Config.Name {
			continue
		}
		if l, err := c.Store.Lock(n); err == nil {
			delete(out, n)
			err := c.Store.DropReservation(n)
			l.Remove()
			if err != nil {
				return nil, err
			}
		}
	}
	for _, n := range names {
		if _, ok := out[n]; ok {
			continue
		}
		dir, err := c.Store.ClusterDir(n)
		if err != nil {
			continue
		}
		rec, err := clusterdir.ReadRecord(dir)
		if err != nil {
			continue
		}
		if p, err := netip.ParsePrefix(rec.Networking.NodeSubnet); err == nil {
			out[n] = p
		}
	}
	delete(out, c.Config.Name)
	return out, nil
}

// checkSubnet returns a *drivers.SubnetInUseError when another cluster,
// a network of one of the cluster's drivers or (when hostInterfaces) an
// interface of this host overlaps p.
func (c *Context) checkSubnet(ctx context.Context, p netip.Prefix, others map[string]netip.Prefix, hostInterfaces bool) error {
	names := make([]string, 0, len(others))
	for n := range others {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if others[n].Overlaps(p) {
			return &drivers.SubnetInUseError{Subnet: p, By: fmt.Sprintf("the node network of hwk cluster %s (%s)", n, others[n])}
		}
	}
	if hostInterfaces {
		overlapping := c.HostInterface
		if overlapping == nil {
			overlapping = drivers.OverlappingInterface
		}
		if by := overlapping(p); by != "" {
			return &drivers.SubnetInUseError{Subnet: p, By: by}
		}
	}
	checked := map[string]bool{}
	for _, n := range c.Config.Nodes {
		d := c.Drivers[n.Name]
		sc, ok := d.(drivers.SubnetChecker)
		if !ok || checked[d.Name()] {
			continue
		}
		checked[d.Name()] = true
		if err := sc.CheckSubnet(ctx, drivers.Network{Cluster: c.Config.Name, Subnet: p}); err != nil {
			return fmt.Errorf("driver %s: %w", d.Name(), err)
		}
	}
	return nil
}
