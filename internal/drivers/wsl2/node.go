package wsl2

import (
	"context"
	"net/netip"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

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
