package hyperv

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// netFacts is what networkFactsScript reports.
type netFacts struct {
	Switch    string    `json:"switch"` // its type; "" when missing
	NAT       []natInfo `json:"nat"`
	Addresses []struct {
		Alias   string `json:"alias"`
		Address string `json:"address"`
		Prefix  int    `json:"prefix"`
	} `json:"addresses"`
	Elevated bool `json:"elevated"`
}

type natInfo struct {
	Name   string `json:"name"`
	Prefix string `json:"prefix"`
}

// elevationFix is how to get the rights that making hwk's network needs.
const elevationFix = "run this hwk command once from an elevated PowerShell (Run as administrator): making hwk's switch address and NAT changes the host's network; later commands need only membership of Hyper-V Administrators"

// CheckSubnet implements drivers.SubnetChecker.
func (d *Driver) CheckSubnet(ctx context.Context, n drivers.Network) error {
	_, _, _, err := d.checkSubnet(ctx, n)
	return err
}

// checkSubnet refuses a subnet outside hwk's NAT, or one that overlaps
// another cluster's, a host address or a NAT of the host's. It returns
// what it learnt of the host: whether the cluster's gateway address and
// hwk's NAT are already there.
func (d *Driver) checkSubnet(ctx context.Context, n drivers.Network) (f netFacts, haveAddress, haveNAT bool, err error) {
	subnet := n.Subnet.Masked()
	gw := n.Gateway()
	if !subnet.Addr().Is4() || subnet.Bits() < natPrefix.Bits() || !natPrefix.Contains(subnet.Addr()) {
		return f, false, false, fmt.Errorf("cluster %s: its node subnet %s is outside %s, the range hwk's Hyper-V NAT covers\n  fix: set networking.nodeSubnet to a /%d or smaller inside %s (the default 172.31.250.0/24 is)",
			n.Cluster, subnet, natPrefix, natPrefix.Bits(), natPrefix)
	}
	if owner, err := d.subnetOwner(n.Cluster, subnet); err != nil {
		return f, false, false, err
	} else if owner != "" {
		return f, false, false, &drivers.SubnetInUseError{Subnet: subnet, By: "hwk cluster " + owner + "'s Hyper-V network"}
	}
	if err := d.run(ctx, networkFactsScript(), &f); err != nil {
		return f, false, false, fmt.Errorf("hwk's Hyper-V network: %w", err)
	}
	if f.Switch != "" && f.Switch != "Internal" {
		return f, false, false, fmt.Errorf("a Hyper-V switch named %s exists but is %s, not Internal\n  fix: remove it (`Hyper-V\\Remove-VMSwitch -Name %s`) if it is a leftover, then run hwk again", quote(switchName), f.Switch, quote(switchName))
	}
	for _, a := range f.Addresses {
		addr, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		p := netip.PrefixFrom(addr, a.Prefix).Masked()
		if a.Alias == adapterAlias {
			if addr == gw && a.Prefix == subnet.Bits() {
				haveAddress = true
				continue
			}
			if p.Overlaps(subnet) {
				// hwk's own adapter, with an address no cluster owns
				// (subnetOwner found none): a leftover, safe to remove.
				return f, false, false, &drivers.SubnetInUseError{Subnet: subnet, By: fmt.Sprintf("address %s/%d on hwk's switch adapter", a.Address, a.Prefix),
					Remove: fmt.Sprintf("NetTCPIP\\Remove-NetIPAddress -InterfaceAlias %s -IPAddress %s", quote(adapterAlias), quote(a.Address))}
			}
			continue
		}
		if p.Overlaps(subnet) {
			return f, false, false, &drivers.SubnetInUseError{Subnet: subnet, By: fmt.Sprintf("host interface %s (%s/%d)", a.Alias, a.Address, a.Prefix)}
		}
	}
	for _, nat := range f.NAT {
		p, err := netip.ParsePrefix(nat.Prefix)
		if err != nil {
			continue
		}
		if nat.Name == natName && p == natPrefix {
			haveNAT = true
			continue
		}
		if p.Overlaps(natPrefix) {
			// Not hwk's NAT (Docker Desktop's, WSL's...): not ours to
			// remove.
			return f, false, false, &drivers.SubnetInUseError{Subnet: subnet, By: fmt.Sprintf("the host's NAT %s (%s)", quote(nat.Name), nat.Prefix)}
		}
	}
	if err := otherNAT(f.NAT); err != nil {
		return f, false, false, err
	}
	return f, haveAddress, haveNAT, nil
}

// otherNAT returns an UnavailableError for a host with a NAT (NetNat)
// other than hwk's, beside which hwk's cannot be made.
func otherNAT(nats []natInfo) error {
	// Why: WinNAT has one internal prefix per host, and "trying to create
	// multiple NATs places the system into an unknown state" (Microsoft
	// Learn, "Set up a NAT network", Troubleshooting: Multiple NAT networks
	// are not supported). hwk's NAT would fail to be made, or the nodes
	// and the other NAT's users would lose their way out (review 5, N1).
	for _, n := range nats {
		if p, err := netip.ParsePrefix(n.Prefix); err == nil && n.Name == natName && p == natPrefix {
			continue
		}
		return &drivers.UnavailableError{Driver: config.DriverHyperV,
			Reason: fmt.Sprintf("the host has a NAT of its own, %s (%s), and Windows has one NAT per host: hwk's (%s) cannot be made beside it", quote(n.Name), n.Prefix, natPrefix),
			Fix:    fmt.Sprintf("find what made it (a lab's NATNetwork, Windows containers, another cluster tool); if nothing uses it any more, remove it in an elevated PowerShell (`NetNat\\Remove-NetNat -Name %s`); otherwise use the virtualbox driver", quote(n.Name))}
	}
	return nil
}

// EnsureNetwork implements drivers.Driver: hwk's internal switch, the
// cluster's gateway address on the host's adapter to it, and hwk's NAT,
// each made only when missing. Making any of the last two needs an
// elevated session; an address or NAT of the host's that overlaps the
// cluster's subnet is refused.
func (d *Driver) EnsureNetwork(ctx context.Context, n drivers.Network) error {
	subnet := n.Subnet.Masked()
	gw := n.Gateway()
	f, haveAddress, haveNAT, err := d.checkSubnet(ctx, n)
	if err != nil {
		return err
	}
	if (!haveAddress || !haveNAT) && !f.Elevated {
		return &drivers.UnavailableError{Driver: config.DriverHyperV, Reason: fmt.Sprintf("cluster %s needs its gateway %s on hwk's switch and hwk's NAT, and this PowerShell is not elevated", n.Cluster, gw), Fix: elevationFix}
	}
	if f.Switch == "" {
		if err := d.run(ctx, switchScript(), nil); err != nil {
			return fmt.Errorf("make hwk's Hyper-V switch for %s: %w", subnet, err)
		}
	}
	if script := addressScript(gw, subnet.Bits(), !haveAddress, !haveNAT); script != "" {
		if err := d.runOnAdapter(ctx, script); err != nil {
			return fmt.Errorf("make hwk's Hyper-V network for %s: %w", subnet, err)
		}
	}
	if err := os.MkdirAll(d.files().Cluster(n.Cluster), 0o700); err != nil {
		return err
	}
	return state.WriteFileAtomic(d.subnetFile(n.Cluster), []byte(subnet.String()+"\n"), 0o644)
}

// runOnAdapter runs a script that addresses the host's adapter to hwk's
// switch, and runs it again while the adapter's IPv4 interface is not
// there yet (adapterMissing), for up to d.adapterWait.
func (d *Driver) runOnAdapter(ctx context.Context, script string) error {
	// Why: Windows may make the interface after New-VMSwitch has returned,
	// and New-NetIPAddress then fails with "Element not found" (Windows
	// System Error 1168; Siemens-Healthineers/K2s#1131).
	deadline := time.Now().Add(d.adapterWait)
	for {
		err := d.run(ctx, script, nil)
		if err == nil || !adapterMissing(err) {
			return err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("the host's adapter %s to hwk's switch had no IPv4 interface after %s (run hwk up again; if it fails the same way, see what Get-NetAdapter and Get-NetIPInterface say of it): %w",
				quote(adapterAlias), d.adapterWait, err)
		}
		drivers.Waiting(ctx, "Windows to make the IPv4 interface of "+adapterAlias)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d.adapterPoll):
		}
	}
}

// adapterMissing reports whether err is Windows reporting that the host's
// adapter to hwk's switch has no IPv4 interface yet: Get-NetIPInterface
// finding none (CmdletizationQuery_NotFound_InterfaceAlias, the CIM
// cmdlets' FullyQualifiedErrorId for a query that matched nothing), or
// New-NetIPAddress's "Element not found" (Windows System Error 1168).
func adapterMissing(err error) bool {
	var pe *PSError
	if !errors.As(err, &pe) {
		return false
	}
	return strings.HasPrefix(pe.ID, "CmdletizationQuery_NotFound") && strings.HasSuffix(pe.ID, ",Get-NetIPInterface") ||
		pe.ID == "Windows System Error 1168,New-NetIPAddress"
}

// clusterSubnet returns the subnet EnsureNetwork recorded for cluster.
func (d *Driver) clusterSubnet(cluster string) (netip.Prefix, error) {
	b, err := os.ReadFile(d.subnetFile(cluster))
	if errors.Is(err, os.ErrNotExist) {
		return netip.Prefix{}, fmt.Errorf("cluster %s has no Hyper-V network yet (EnsureNetwork makes it)", cluster)
	}
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.ParsePrefix(strings.TrimSpace(string(b)))
}

// subnetOwner returns the name of another cluster whose Hyper-V network
// overlaps subnet, from the subnets the driver recorded, or "".
func (d *Driver) subnetOwner(cluster string, subnet netip.Prefix) (string, error) {
	files, err := filepath.Glob(filepath.Join(state.NewStore(d.dirs).ClustersDir(), "*", "hyperv", "subnet"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		other := filepath.Base(filepath.Dir(filepath.Dir(f)))
		if other == cluster {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if p, err := netip.ParsePrefix(strings.TrimSpace(string(b))); err == nil && p.Overlaps(subnet) {
			return other, nil
		}
	}
	return "", nil
}

// DeleteNetwork implements drivers.Driver: the cluster's gateway address,
// then hwk's switch and NAT once no hwk VM uses the switch. What needs
// elevation and cannot be done without it stays, with a warning; it
// harms nothing and the next cluster uses it.
func (d *Driver) DeleteNetwork(ctx context.Context, cluster string) error {
	subnet, err := d.clusterSubnet(cluster)
	if err == nil {
		var out struct {
			Kept []string `json:"kept"`
		}
		if err := d.run(ctx, deleteNetworkScript(drivers.Network{Subnet: subnet}.Gateway()), &out); err != nil {
			return fmt.Errorf("remove cluster %s's Hyper-V network: %w", cluster, err)
		}
		if len(out.Kept) > 0 {
			d.warn(fmt.Sprintf("kept hwk's Hyper-V %s: removing it needs an elevated PowerShell (`hwk down` as administrator removes it; it is harmless to keep)", strings.Join(out.Kept, " and ")))
		}
	}
	if err := os.RemoveAll(d.files().Cluster(cluster)); err != nil {
		return fmt.Errorf("remove the hyperv driver's files of cluster %s: %w", cluster, err)
	}
	return nil
}

// adapterTimeout is how long EnsureNetwork waits for Windows to make the
// IPv4 interface of the host's adapter to hwk's new switch.
const adapterTimeout = 30 * time.Second
