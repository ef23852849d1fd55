package libvirt

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/hwk-dev/hwk/drivers"
)

// CheckSubnet implements drivers.SubnetChecker: the cluster's own network
// is no conflict; another libvirt network or a host route over the subnet
// is.
func (d *Driver) CheckSubnet(_ context.Context, n drivers.Network) error {
	n.Subnet = n.Subnet.Masked()
	return d.with(func(l *golibvirt.Libvirt) error {
		if _, err := l.NetworkLookupByName(NetworkName(n.Cluster)); err == nil {
			return nil
		}
		return d.subnetConflict(l, n)
	})
}

// subnetConflict finds a host route or another libvirt network over the
// subnet of a cluster that has no network yet.
func (d *Driver) subnetConflict(l *golibvirt.Libvirt, n drivers.Network) error {
	routes, err := d.routes()
	if err != nil {
		return err
	}
	if c := routeConflict(routes, n.Subnet, bridgeName(n.Cluster)); c != nil {
		return c
	}
	if c, err := networkConflict(l, n.Subnet, NetworkName(n.Cluster)); err != nil || c != nil {
		if c != nil {
			return c
		}
		return err
	}
	return nil
}

// EnsureNetwork implements drivers.Driver: the cluster's NAT network, on
// a subnet no host route and no other libvirt network uses.
func (d *Driver) EnsureNetwork(_ context.Context, n drivers.Network) error {
	if !n.Subnet.Addr().Is4() || n.Subnet.Bits() > 29 {
		return fmt.Errorf("network %s: subnet %s must be IPv4 with room for nodes (/29 or larger)", NetworkName(n.Cluster), n.Subnet)
	}
	n.Subnet = n.Subnet.Masked()
	return d.with(func(l *golibvirt.Libvirt) error {
		name := NetworkName(n.Cluster)
		nw, err := l.NetworkLookupByName(name)
		switch {
		case err == nil:
			raw, err := l.NetworkGetXMLDesc(nw, 0)
			if err != nil {
				return fmt.Errorf("read network %s: %w", name, err)
			}
			if got := networkPrefixes(raw); len(got) != 1 || got[0] != n.Subnet {
				return fmt.Errorf("libvirt network %s is there with subnet %v, not the cluster's %s\n  fix: remove the cluster with `hwk down --name %s`, or the network with `virsh -c qemu:///system net-destroy %s; virsh -c qemu:///system net-undefine %s`",
					name, got, n.Subnet, n.Cluster, name, name)
			}
			return ensureNetwork(l, name, raw)
		case !isCode(err, golibvirt.ErrNoNetwork):
			return fmt.Errorf("look up network %s: %w", name, err)
		}
		if err := d.subnetConflict(l, n); err != nil {
			return err
		}
		xml, err := networkXML(n, nil)
		if err != nil {
			return err
		}
		return ensureNetwork(l, name, xml)
	})
}

// DeleteNetwork implements drivers.Driver: the network, and the driver's
// files in the cluster's directory (its SSH key).
func (d *Driver) DeleteNetwork(_ context.Context, cluster string) error {
	return d.with(func(l *golibvirt.Libvirt) error {
		return d.deleteNetwork(l, cluster)
	})
}

func (d *Driver) deleteNetwork(l *golibvirt.Libvirt, cluster string) error {
	if err := removeNetwork(l, NetworkName(cluster)); err != nil {
		return err
	}
	if err := os.RemoveAll(d.clusterFiles(cluster)); err != nil {
		return fmt.Errorf("remove the libvirt driver's files of cluster %s: %w", cluster, err)
	}
	return nil
}

// clusterSubnet is the subnet of the cluster's network, which
// EnsureNetwork made.
func clusterSubnet(l *golibvirt.Libvirt, cluster string) (netip.Prefix, error) {
	name := NetworkName(cluster)
	nw, err := l.NetworkLookupByName(name)
	if isCode(err, golibvirt.ErrNoNetwork) {
		return netip.Prefix{}, fmt.Errorf("cluster %s has no libvirt network %s; it is made before the nodes (`hwk up` does)", cluster, name)
	}
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("look up network %s: %w", name, err)
	}
	raw, err := l.NetworkGetXMLDesc(nw, 0)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("read network %s: %w", name, err)
	}
	ps := networkPrefixes(raw)
	if len(ps) != 1 {
		return netip.Prefix{}, fmt.Errorf("network %s has %d IPv4 ranges; hwk made it with one", name, len(ps))
	}
	return ps[0], nil
}

// confirmLease checks that the network's DHCP server gave the node its
// reserved address.
func confirmLease(l *golibvirt.Libvirt, r drivers.Ref, ip netip.Addr, console string) error {
	name := NetworkName(r.Cluster)
	nw, err := l.NetworkLookupByName(name)
	if err != nil {
		return fmt.Errorf("look up network %s: %w", name, err)
	}
	leases, _, err := l.NetworkGetDhcpLeases(nw, golibvirt.OptString{MAC(ip)}, 1, 0)
	if err != nil {
		return fmt.Errorf("DHCP leases of network %s: %w", name, err)
	}
	var got []string
	for _, le := range leases {
		got = append(got, le.Ipaddr)
	}
	return checkLease(r, ip, got, console)
}

// checkLease: the addresses leased to the node's MAC include its own.
func checkLease(r drivers.Ref, ip netip.Addr, leased []string, console string) error {
	if slices.Contains(leased, ip.String()) {
		return nil
	}
	if len(leased) > 0 {
		return fmt.Errorf("node %s (MAC %s) leased %s, not its reserved %s; its console log is %s", r.Name, MAC(ip), strings.Join(leased, ", "), ip, console)
	}
	return fmt.Errorf("node %s (MAC %s) has no DHCP lease on %s yet: it is still booting, or its network did not come up (console log: %s)", r.Name, MAC(ip), NetworkName(r.Cluster), console)
}
