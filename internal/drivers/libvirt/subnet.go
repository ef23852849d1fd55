package libvirt

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/bits"
	"net/netip"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/hwk-dev/hwk/drivers"
)

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

// maskBits is the prefix length of a netmask.
func maskBits(m netip.Addr) int {
	n := 0
	for _, b := range m.As4() {
		n += bits.OnesCount8(b)
	}
	return n
}

// routeConflict is the first route, other than default routes and those
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

// networkConflict is the first of libvirt's networks other than own
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

// networkPrefixes are the IPv4 ranges a network's XML gives its bridge.
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
