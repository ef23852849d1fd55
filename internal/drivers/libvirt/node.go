package libvirt

import (
	"context"
	"fmt"
	"net/netip"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// HostEndpoint implements drivers.Driver: the host is on the cluster's
// network, so it reaches the node at its own address.
func (d *Driver) HostEndpoint(ctx context.Context, r drivers.Ref, port uint16) (netip.AddrPort, error) {
	return drivers.OwnAddress(ctx, d, r, port, "libvirt domain")
}

// Node implements drivers.Driver: SSH to the node's address with the
// cluster's key, accepting only the host key hwk made for the node. A
// Linux node asks DHCP for its address, so its lease must show the
// reserved address first.
func (d *Driver) Node(_ context.Context, r drivers.Ref) (*node.Node, error) {
	return withConn(d, func(l *golibvirt.Libvirt) (*node.Node, error) {
		m, err := inspect(l, r.Name)
		if err != nil {
			return nil, err
		}
		switch {
		case m.State == drivers.StateMissing || m.Cluster != r.Cluster:
			return nil, fmt.Errorf("node %s of cluster %s has no libvirt domain", r.Name, r.Cluster)
		case m.State != drivers.StateRunning:
			return nil, fmt.Errorf("node %s is %s, not running; start it with `hwk start --name %s`", r.Name, m.Detail, r.Cluster)
		}
		if m.OS == config.Linux {
			if err := confirmLease(l, r, m.IP, d.ConsoleLog(r)); err != nil {
				return nil, err
			}
		}
		return vmnode.Handle(r.Name, m.OS, m.IP, d.files().Paths(r))
	})
}
