package virtualbox

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
	"github.com/hwk-dev/hwk/pkg/node"
)

// HostEndpoint implements drivers.Driver: the loopback port forwarded to
// the node's port, pinned when the node was made.
func (d *Driver) HostEndpoint(ctx context.Context, r drivers.Ref, port uint16) (netip.AddrPort, error) {
	v, err := d.showVM(ctx, r.Name)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if !v.ours(r) {
		return netip.AddrPort{}, fmt.Errorf("node %s of cluster %s has no VirtualBox VM", r.Name, r.Cluster)
	}
	host, ok := v.Meta.Ports[port]
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("node %s has no host port forwarded to its port %d", r.Name, port)
	}
	return netip.AddrPortFrom(loopback, host), nil
}

var loopback = netip.MustParseAddr("127.0.0.1")

// Node implements drivers.Driver: SSH through the port forwarded to the
// node's port 22, with the cluster's key, accepting only the host key
// pinned for the node.
func (d *Driver) Node(ctx context.Context, r drivers.Ref) (*node.Node, error) {
	v, err := d.showVM(ctx, r.Name)
	if err != nil {
		return nil, err
	}
	if !v.ours(r) {
		return nil, fmt.Errorf("node %s of cluster %s has no VirtualBox VM", r.Name, r.Cluster)
	}
	if v.State != "running" {
		return nil, fmt.Errorf("node %s is %s, not running; start it with `hwk start --name %s`", r.Name, v.State, r.Cluster)
	}
	if d.handle != nil {
		return d.handle(r.Name, v.Meta.OS, v.Meta.IP)
	}
	ssh, ok := v.Meta.Ports[22]
	if !ok {
		return nil, fmt.Errorf("node %s has no host port forwarded to its SSH port", r.Name)
	}
	return vmnode.HandleAt(r.Name, v.Meta.OS, v.Meta.IP, netip.AddrPortFrom(loopback, ssh), d.files().Paths(r))
}
