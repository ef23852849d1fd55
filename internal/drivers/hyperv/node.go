package hyperv

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// HostEndpoint implements drivers.Driver: the node's own address, which
// the host reaches over hwk's switch.
func (d *Driver) HostEndpoint(ctx context.Context, r drivers.Ref, port uint16) (netip.AddrPort, error) {
	return drivers.OwnAddress(ctx, d, r, port, "Hyper-V VM")
}

// Node implements drivers.Driver: once the guest reports its address
// through Hyper-V's KVP exchange and it is the static one hwk gave it,
// SSH to it with the cluster's key and the node's pinned host key.
func (d *Driver) Node(ctx context.Context, r drivers.Ref) (*node.Node, error) {
	v, err := d.inspect(ctx, r.Name)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("node %s of cluster %s has no Hyper-V VM", r.Name, r.Cluster)
	}
	m := v.machine()
	switch {
	case m.State == drivers.StateMissing || m.Cluster != r.Cluster:
		return nil, fmt.Errorf("node %s of cluster %s has no Hyper-V VM", r.Name, r.Cluster)
	case m.State != drivers.StateRunning:
		return nil, fmt.Errorf("node %s is %s, not running; start it with `hwk start --name %s`", r.Name, m.Detail, r.Cluster)
	}
	unconfirmed := confirmAddress(r, m.OS, m.IP, v.IPs)
	var n *node.Node
	if d.handle != nil {
		n, err = d.handle(r.Name, m.OS, m.IP)
	} else {
		n, err = vmnode.Handle(r.Name, m.OS, m.IP, d.files().Paths(r))
	}
	switch {
	case err != nil && unconfirmed != nil:
		return nil, fmt.Errorf("%w (and its handle: %v)", unconfirmed, err)
	case err != nil:
		return nil, err
	case unconfirmed != nil:
		// KVP does not show the static address, which happens once the
		// node runs: Calico's New-HNSNetwork moves the guest's address to
		// a vEthernet adapter, whose addresses Hyper-V may not report. The
		// pinned host key at the static address confirms the node as well
		// (it is all a Linux guest without a KVP daemon ever gets).
		if cerr := n.Connect(ctx); cerr != nil {
			return nil, fmt.Errorf("%w; nor does SSH at %s answer with the node's pinned host key (%w)", unconfirmed, m.IP, cerr)
		}
	}
	return n, nil
}

// confirmAddress checks the addresses the guest reported (KVP) on any of
// the VM's adapters for the one hwk gave it; a Linux guest that reports
// nothing passes. An error means Node must confirm the node by the SSH
// handshake against its pinned host key before it trusts it.
func confirmAddress(r drivers.Ref, guest config.OS, ip netip.Addr, reported []string) error {
	// Why Linux passes: hwk's Linux image carries no KVP daemon (Debian's
	// hyperv-daemons is not among its packages), so it is taken at its
	// static address, and the SSH handshake against its pinned host key is
	// what confirms the node is there.
	var v4 []string
	for _, s := range reported {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			continue
		}
		if a == ip {
			return nil
		}
		v4 = append(v4, s)
	}
	if len(v4) == 0 {
		if guest == config.Linux {
			return nil
		}
		return fmt.Errorf("node %s has not reported an address through Hyper-V's data exchange (KVP) yet: it is still booting, or its network did not come up (see `Get-VMNetworkAdapter -VMName %s`)", r.Name, quote(r.Name))
	}
	return fmt.Errorf("node %s reports %s, not its static %s: its seed was not applied", r.Name, strings.Join(v4, ", "), ip)
}
