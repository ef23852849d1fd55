package drivers

import (
	"fmt"
	"net"
	"net/netip"
)

// FreeLoopbackPorts picks, for each guest port, a loopback port free on
// this host now, for a driver to publish or forward that guest port on
// and keep: the kubeconfig written at up must still name the API server
// after the node restarts.
func FreeLoopbackPorts(guest []uint16) (map[uint16]uint16, error) {
	out := map[uint16]uint16{}
	for _, p := range guest {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free host port for %d/tcp: %w", p, err)
		}
		out[p] = uint16(l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	return out, nil
}

// OverlappingInterface describes a host interface with an address in
// subnet ("" when none has one): a VPN, another hypervisor's network or a
// container engine's bridge on the same range would make node traffic
// vanish.
func OverlappingInterface(subnet netip.Prefix) string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			p, err := netip.ParsePrefix(ipn.String())
			if err == nil && p.Overlaps(subnet) {
				return fmt.Sprintf("host interface %s (%s)", ifc.Name, p)
			}
		}
	}
	return ""
}
