package drivers

import (
	"fmt"
	"net"
	"net/netip"
)

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
