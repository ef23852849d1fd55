package actions

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/hwk-dev/hwk/drivers"
)

// Network makes the cluster's node network on every driver the nodes use.
type Network struct{}

// Name implements Action.
func (Network) Name() string { return "Creating the node network" }

// Execute implements Action. It records the cluster first.
func (Network) Execute(ctx context.Context, c *Context) error {
	if err := c.record(); err != nil {
		return err
	}
	subnet, err := netip.ParsePrefix(c.Config.Networking.NodeSubnet)
	if err != nil {
		return fmt.Errorf("networking.nodeSubnet: %w", err)
	}
	done := map[string]bool{}
	for _, n := range c.Config.Nodes {
		d := c.Drivers[n.Name]
		if done[d.Name()] {
			continue
		}
		done[d.Name()] = true
		if err := d.EnsureNetwork(ctx, drivers.Network{Cluster: c.Config.Name, Subnet: subnet}); err != nil {
			return err
		}
	}
	return nil
}
