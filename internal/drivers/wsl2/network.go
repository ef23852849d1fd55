package wsl2

import (
	"context"

	"github.com/hwk-dev/hwk/drivers"
)

// Networking, as decided: NAT mode, the default, with an address of the
// node's own. In NAT mode WSL's VM gets a new address on WSL's switch at
// every start; mirrored mode shares the host's addresses, but WSL does
// not carry traffic between a mirrored distribution and other VMs on the
// host (a WSL maintainer, microsoft/WSL#11494), which is where the Windows
// workers are. So the node keeps the address hwk gave it on the cluster's
// node network as a second address of its VM (hwk-wsl-net, at every
// boot), kubeadm's node IP and certificate name that address, and the
// host routes it to the VM's current address (hostroute.go). Up refuses
// other modes with the fix (CheckUp; Preflight, which down needs, does
// not); .wslconfig is never edited by hwk (it is global,
// and needs every distribution shut down). The host reaches the API
// server on 127.0.0.1 (WSL's localhost forwarding). All distributions
// share one VM and one network, so a host has at most one hwk WSL node,
// and the ports it listens on must be free there.

// EnsureNetwork implements drivers.Driver. WSL's network is WSL's; the
// driver keeps the cluster's node network for the nodes it makes, which
// route it through the host.
func (d *Driver) EnsureNetwork(_ context.Context, n drivers.Network) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.subnets[n.Cluster] = n.Subnet
	return nil
}

// DeleteNetwork implements drivers.Driver: there is nothing of the
// cluster's in WSL's network once its node is gone.
func (d *Driver) DeleteNetwork(_ context.Context, cluster string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.subnets, cluster)
	return nil
}
