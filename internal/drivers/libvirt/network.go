package libvirt

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"math/bits"
	"net/netip"
	"os"
	"slices"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

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
	if err := os.RemoveAll(d.files().Cluster(cluster)); err != nil {
		return fmt.Errorf("remove the libvirt driver's files of cluster %s: %w", cluster, err)
	}
	return nil
}

// clusterSubnet returns the subnet of the cluster's network, which
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

// checkLease checks that the addresses leased to the node's MAC include
// its own.
func checkLease(r drivers.Ref, ip netip.Addr, leased []string, console string) error {
	if slices.Contains(leased, ip.String()) {
		return nil
	}
	if len(leased) > 0 {
		return fmt.Errorf("node %s (MAC %s) leased %s, not its reserved %s; its console log is %s", r.Name, MAC(ip), strings.Join(leased, ", "), ip, console)
	}
	return fmt.Errorf("node %s (MAC %s) has no DHCP lease on %s yet: it is still booting, or its network did not come up (console log: %s)", r.Name, MAC(ip), NetworkName(r.Cluster), console)
}

// ensureNetwork defines and starts the network xml describes, or starts
// it if it is defined but inactive.
func ensureNetwork(l *golibvirt.Libvirt, name, xml string) error {
	nw, err := l.NetworkLookupByName(name)
	if isCode(err, golibvirt.ErrNoNetwork) {
		if nw, err = l.NetworkDefineXML(xml); err != nil {
			return fmt.Errorf("define network %s: %w", name, err)
		}
	} else if err != nil {
		return fmt.Errorf("look up network %s: %w", name, err)
	}
	active, err := l.NetworkIsActive(nw)
	if err != nil {
		return fmt.Errorf("network %s: %w", name, err)
	}
	if active == 0 {
		if err := l.NetworkCreate(nw); err != nil {
			return fmt.Errorf("start network %s: %w", name, err)
		}
	}
	return nil
}

// removeNetwork stops and undefines a network; a missing one is not an
// error.
func removeNetwork(l *golibvirt.Libvirt, name string) error {
	nw, err := l.NetworkLookupByName(name)
	if isCode(err, golibvirt.ErrNoNetwork) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up network %s: %w", name, err)
	}
	if active, err := l.NetworkIsActive(nw); err == nil && active != 0 {
		if err := l.NetworkDestroy(nw); err != nil && !isCode(err, golibvirt.ErrOperationInvalid) {
			return fmt.Errorf("stop network %s: %w", name, err)
		}
	}
	if err := l.NetworkUndefine(nw); err != nil && !isCode(err, golibvirt.ErrNoNetwork) {
		return fmt.Errorf("undefine network %s: %w", name, err)
	}
	return nil
}

// setDHCPHost adds (or, with add false, removes) the network's DHCP
// reservation for h, in the running network and its definition. Adding
// what is there, or removing what is not, changes nothing; a reservation
// of the same name, MAC or address is replaced.
func setDHCPHost(l *golibvirt.Libvirt, network string, h dhcpHost, add bool) error {
	nw, err := l.NetworkLookupByName(network)
	if isCode(err, golibvirt.ErrNoNetwork) && !add {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up network %s: %w", network, err)
	}
	raw, err := l.NetworkGetXMLDesc(nw, 0)
	if err != nil {
		return fmt.Errorf("read network %s: %w", network, err)
	}
	var def libvirtxml.Network
	if err := def.Unmarshal(raw); err != nil {
		return fmt.Errorf("read network %s: %w", network, err)
	}
	flags := golibvirt.NetworkUpdateAffectConfig
	if active, err := l.NetworkIsActive(nw); err == nil && active != 0 {
		flags |= golibvirt.NetworkUpdateAffectLive
	}
	var want libvirtxml.NetworkDHCPHost
	if add {
		want = libvirtxml.NetworkDHCPHost{MAC: MAC(h.IP), Name: h.Name, IP: h.IP.String()}
	}
	for _, ip := range def.IPs {
		if ip.DHCP == nil {
			continue
		}
		for _, have := range ip.DHCP.Hosts {
			if add && have.MAC == want.MAC && have.Name == want.Name && have.IP == want.IP {
				return nil
			}
			if have.Name != h.Name && (!add || (have.MAC != want.MAC && have.IP != want.IP)) {
				continue
			}
			if err := updateDHCPHost(l, nw, golibvirt.NetworkUpdateCommandDelete, have, flags); err != nil {
				return err
			}
		}
	}
	if !add {
		return nil
	}
	return updateDHCPHost(l, nw, golibvirt.NetworkUpdateCommandAddLast, want, flags)
}

func updateDHCPHost(l *golibvirt.Libvirt, nw golibvirt.Network, cmd golibvirt.NetworkUpdateCommand, h libvirtxml.NetworkDHCPHost, flags golibvirt.NetworkUpdateFlags) error {
	x, err := xml.Marshal(h)
	if err != nil {
		return err
	}
	// The struct's element is <host>, as the update wants it.
	if err := l.NetworkUpdateCompat(nw, cmd, golibvirt.NetworkSectionIPDhcpHost, -1, string(x), flags); err != nil {
		verb := "add"
		if cmd == golibvirt.NetworkUpdateCommandDelete {
			verb = "remove"
		}
		return fmt.Errorf("%s the DHCP reservation of %s (%s, %s) on network %s: %w", verb, h.Name, h.MAC, h.IP, nw.Name, err)
	}
	return nil
}

func hostRoutes() ([]route, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return nil, fmt.Errorf("read the host's routes: %w", err)
	}
	defer f.Close()
	return parseRoutes(f)
}

// route is one IPv4 route of the host.
type route struct {
	Iface string
	Dst   netip.Prefix
}

// parseRoutes reads /proc/net/route: a header line, then one route per
// line with the destination and mask as little-endian hex.
func parseRoutes(r io.Reader) ([]route, error) {
	var out []route
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		dst, err := leAddr(f[1])
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", sc.Text(), err)
		}
		mask, err := leAddr(f[7])
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", sc.Text(), err)
		}
		out = append(out, route{Iface: f[0], Dst: netip.PrefixFrom(dst, maskBits(mask)).Masked()})
	}
	return out, sc.Err()
}

// leAddr parses an address /proc/net/route writes: 8 hex digits in host
// (little-endian) order.
func leAddr(s string) (netip.Addr, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 4 {
		return netip.Addr{}, fmt.Errorf("bad address %q", s)
	}
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], binary.LittleEndian.Uint32(b))
	return netip.AddrFrom4(a), nil
}

// maskBits returns the prefix length of a netmask.
func maskBits(m netip.Addr) int {
	n := 0
	for _, b := range m.As4() {
		n += bits.OnesCount8(b)
	}
	return n
}

// routeConflict returns the first route, other than default routes and those
// on bridge (the cluster's own), that overlaps subnet.
func routeConflict(routes []route, subnet netip.Prefix, bridge string) *drivers.SubnetInUseError {
	for _, r := range routes {
		if r.Dst.Bits() == 0 || r.Iface == bridge {
			continue
		}
		if r.Dst.Overlaps(subnet) {
			return &drivers.SubnetInUseError{Subnet: subnet, By: fmt.Sprintf("the host's route to %s on %s", r.Dst, r.Iface)}
		}
	}
	return nil
}

// networkConflict returns the first of libvirt's networks other than own
// whose addresses overlap subnet.
func networkConflict(l *golibvirt.Libvirt, subnet netip.Prefix, own string) (*drivers.SubnetInUseError, error) {
	nets, _, err := l.ConnectListAllNetworks(1, 0)
	if err != nil {
		return nil, fmt.Errorf("list libvirt networks: %w", err)
	}
	for _, n := range nets {
		if n.Name == own {
			continue
		}
		raw, err := l.NetworkGetXMLDesc(n, 0)
		if err != nil {
			return nil, fmt.Errorf("read libvirt network %s: %w", n.Name, err)
		}
		for _, p := range networkPrefixes(raw) {
			if p.Overlaps(subnet) {
				// Another cluster's, or not hwk's: not ours to remove.
				return &drivers.SubnetInUseError{Subnet: subnet, By: fmt.Sprintf("libvirt network %q (%s)", n.Name, p)}, nil
			}
		}
	}
	return nil, nil
}

// networkPrefixes returns the IPv4 ranges a network's XML gives its bridge.
func networkPrefixes(raw string) []netip.Prefix {
	var nw libvirtxml.Network
	if err := nw.Unmarshal(raw); err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, ip := range nw.IPs {
		a, err := netip.ParseAddr(ip.Address)
		if err != nil || !a.Is4() {
			continue
		}
		bits := int(ip.Prefix)
		if ip.Netmask != "" {
			if m, err := netip.ParseAddr(ip.Netmask); err == nil && m.Is4() {
				bits = maskBits(m)
			}
		}
		if bits == 0 && ip.Netmask == "" {
			bits = 24 // libvirt's default when neither is given
		}
		out = append(out, netip.PrefixFrom(a, bits).Masked())
	}
	return out
}
