package docker

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/moby/moby/api/types/network"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// HostEndpoint implements drivers.Driver: the loopback port the engine
// published for port.
func (d *Driver) HostEndpoint(ctx context.Context, m drivers.Ref, port uint16) (netip.AddrPort, error) {
	_, ctr, err := d.inspect(ctx, m)
	if err != nil {
		return netip.AddrPort{}, err
	}
	p, _ := network.PortFrom(port, network.TCP)
	if ctr.NetworkSettings != nil {
		for _, b := range ctr.NetworkSettings.Ports[p] {
			hp, err := strconv.ParseUint(b.HostPort, 10, 16)
			if err != nil || !b.HostIP.Is4() {
				continue
			}
			return netip.AddrPortFrom(b.HostIP, uint16(hp)), nil
		}
	}
	return netip.AddrPort{}, fmt.Errorf("node %s publishes no host port for %d/tcp (is it running?)", m.Name, port)
}

// Node implements drivers.Driver: a handle over docker exec.
func (d *Driver) Node(ctx context.Context, m drivers.Ref) (*node.Node, error) {
	c, ctr, err := d.inspect(ctx, m)
	if err != nil {
		return nil, err
	}
	if ctr.State == nil || !ctr.State.Running {
		return nil, fmt.Errorf("node %s is not running (%s)", m.Name, machine(ctr).Detail)
	}
	return node.New(m.Name, config.OS(ctr.Config.Labels[LabelOS]), &execTransport{d: d, c: c, id: ctr.ID}), nil
}
