package libvirt

import (
	"net/netip"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
)

// seedFiles returns a libvirt node's cidata seed files (see vmnode.SeedFiles):
// the NIC's MAC is derived from its address, libvirt's dnsmasq answers
// DNS on the gateway, and Linux nodes ask its DHCP server, which has
// their address reserved.
func seedFiles(s drivers.MachineSpec, subnet netip.Prefix) (map[string][]byte, error) {
	gw := drivers.Network{Subnet: subnet}.Gateway()
	return vmnode.SeedFiles(s, vmnode.Net{Subnet: subnet, MAC: MAC(s.IP), DNS: []netip.Addr{gw}, DHCP: true})
}
