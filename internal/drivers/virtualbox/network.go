package virtualbox

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/hwk-dev/hwk/drivers"
)

// natNet is a NAT Network as `natnetwork list` reports it.
type natNet struct {
	Name     string
	Subnet   netip.Prefix
	DHCP     bool
	Forwards []forwardRule
}

// forwardRule is an IPv4 port forward of a NAT Network, in VBoxManage's
// syntax name:tcp:[hostip]:hostport:[guestip]:guestport.
type forwardRule struct {
	Name  string
	Host  uint16
	Guest netip.AddrPort
}

func (f forwardRule) String() string {
	return fmt.Sprintf("%s:tcp:[127.0.0.1]:%d:[%s]:%d", f.Name, f.Host, f.Guest.Addr(), f.Guest.Port())
}

var ruleRE = regexp.MustCompile(`^([^:]+):tcp:\[([0-9.]*)\]:(\d+):\[([0-9.]+)\]:(\d+)$`)

func parseRule(s string) (forwardRule, bool) {
	m := ruleRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return forwardRule{}, false
	}
	h, err1 := strconv.ParseUint(m[3], 10, 16)
	ip, err2 := netip.ParseAddr(m[4])
	g, err3 := strconv.ParseUint(m[5], 10, 16)
	if err1 != nil || err2 != nil || err3 != nil {
		return forwardRule{}, false
	}
	return forwardRule{Name: m[1], Host: uint16(h), Guest: netip.AddrPortFrom(ip, uint16(g))}, true
}

// forwardName returns the name of the forward of a node's guest port: the
// node's name first, so a node's forwards are found by it.
func forwardName(node string, guest uint16) string { return fmt.Sprintf("%s-%d", node, guest) }

// natNetworks lists the host's NAT Networks.
func (d *Driver) natNetworks(ctx context.Context) ([]natNet, error) {
	out, err := d.run(ctx, "natnetwork", "list")
	if err != nil {
		return nil, fmt.Errorf("list NAT Networks: %w", err)
	}
	var nets []natNet
	for _, b := range blocks(out) {
		name := b.Fields["Name"]
		if name == "" {
			continue
		}
		n := natNet{Name: name, DHCP: b.Fields["DHCP Server"] == "Yes"}
		n.Subnet, _ = netip.ParsePrefix(b.Fields["Network"])
		for _, line := range b.Extra["Port-forwarding (ipv4)"] {
			if r, ok := parseRule(line); ok {
				n.Forwards = append(n.Forwards, r)
			}
		}
		nets = append(nets, n)
	}
	return nets, nil
}

// network returns the cluster's NAT Network; nil when there is none.
func (d *Driver) network(ctx context.Context, cluster string) (*natNet, error) {
	nets, err := d.natNetworks(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range nets {
		if n.Name == NetworkName(cluster) {
			return &n, nil
		}
	}
	return nil, nil
}

// CheckSubnet implements drivers.SubnetChecker: the cluster's own NAT
// Network is no conflict; another NAT Network over the subnet is.
func (d *Driver) CheckSubnet(ctx context.Context, n drivers.Network) error {
	// Why: a NAT Network is private to its VMs, so overlapping another
	// would route nothing astray; but a user reading VirtualBox Manager
	// should not have to tell two networks of one range apart.
	nets, err := d.natNetworks(ctx)
	if err != nil {
		return err
	}
	_, err = subnetFree(nets, n)
	return err
}

// subnetFree checks n against the host's NAT Networks, returning the
// cluster's own when it has one.
func subnetFree(nets []natNet, n drivers.Network) (*natNet, error) {
	for _, o := range nets {
		if o.Name == NetworkName(n.Cluster) {
			return &o, nil
		}
	}
	for _, o := range nets {
		if o.Subnet.IsValid() && o.Subnet.Overlaps(n.Subnet) {
			return nil, &drivers.SubnetInUseError{Subnet: n.Subnet, By: fmt.Sprintf("VirtualBox NAT Network %q (%s)", o.Name, o.Subnet)}
		}
	}
	return nil, nil
}

// EnsureNetwork implements drivers.Driver: a NAT Network named for the
// cluster, without DHCP (the nodes' addresses are static, from their
// seeds), which VirtualBox starts with the first VM on it.
func (d *Driver) EnsureNetwork(ctx context.Context, n drivers.Network) error {
	// Why no `natnetwork start`: VirtualBox starts a NAT Network's service
	// when the first VM on it starts and stops it with the last
	// (VirtualBoxImpl.cpp, i_natNetworkRefInc/i_natNetworkRefDec).
	n.Subnet = n.Subnet.Masked()
	nets, err := d.natNetworks(ctx)
	if err != nil {
		return err
	}
	cur, err := subnetFree(nets, n)
	if err != nil {
		return err
	}
	if cur != nil {
		if cur.Subnet != n.Subnet {
			return fmt.Errorf("VirtualBox NAT Network %s is on %s, not the cluster's %s\n  fix: `hwk down --name %s`, then `hwk up` again",
				cur.Name, cur.Subnet, n.Subnet, n.Cluster)
		}
		return nil
	}
	if _, err := d.run(ctx, "natnetwork", "add", "--netname", NetworkName(n.Cluster), "--network", n.Subnet.String(),
		"--enable", "--dhcp", "off"); err != nil {
		return fmt.Errorf("make NAT Network %s: %w", NetworkName(n.Cluster), err)
	}
	return nil
}

// DeleteNetwork implements drivers.Driver.
func (d *Driver) DeleteNetwork(ctx context.Context, cluster string) error {
	cur, err := d.network(ctx, cluster)
	if err != nil || cur == nil {
		return err
	}
	if _, err := d.run(ctx, "natnetwork", "remove", "--netname", cur.Name); err != nil && !IsNotFound(err) {
		return fmt.Errorf("remove NAT Network %s: %w", cur.Name, err)
	}
	return nil
}

// removeForwards removes the port forwards of node r.
func (d *Driver) removeForwards(ctx context.Context, r drivers.Ref) error {
	cur, err := d.network(ctx, r.Cluster)
	if err != nil || cur == nil {
		return err
	}
	for _, f := range cur.Forwards {
		port, ok := strings.CutPrefix(f.Name, r.Name+"-")
		if _, err := strconv.ParseUint(port, 10, 16); ok && err == nil {
			if _, err := d.run(ctx, "natnetwork", "modify", "--netname", cur.Name, "--port-forward-4", "delete", f.Name); err != nil {
				return fmt.Errorf("remove port forward %s: %w", f.Name, err)
			}
		}
	}
	return nil
}

// NetworkName returns the name of a cluster's NAT Network.
func NetworkName(cluster string) string { return "hwk-" + cluster }
