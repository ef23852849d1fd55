package wsl2

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/hyperv"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// The host's half of the node's stable address (network.go): Windows routes
// the node's address to the VM's current one on WSL's switch, and
// forwards between that switch and hwk's Hyper-V switch, where the
// Windows workers are. The route goes in the active store only: WSL's
// switch is made anew at every start of its VM, and so is the VM's
// address, so the driver routes again at every start.

// wslVMCreator is the Hyper-V firewall's VM creator ID of WSL
// (learn.microsoft.com/windows/security/operating-system-security/
// network-security/windows-firewall/hyper-v-firewall), whose default
// blocks inbound traffic to WSL's VM on Windows 11 22H2 and later.
const wslVMCreator = "{40E0AC32-46A5-438A-A0B2-2B479E8F2E90}"

// vmAddressScript prints the address WSL gave its VM this time: the
// first of the default route's interface that is not a host address
// (the node's own /32, which hwk-wsl-net adds).
const vmAddressScript = `dev=$(ip -4 route show default | awk '{ for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit } }')
[ -n "$dev" ] || exit 0
ip -4 -o addr show dev "$dev" scope global | awk '$4 !~ /\/32$/ { split($4, a, "/"); print a[1]; exit }'
`

// routeScript routes address to vm on the interface reaching vm (WSL's
// switch), turns on forwarding there and on the one holding gateway
// (hwk's switch), and lets the node network into WSL's VM through the
// Hyper-V firewall where Windows has one; without that interface (no
// Windows workers) or elevation, it changes nothing and reports it.
func routeScript(cluster string, address, vm, gateway netip.Addr, subnet netip.Prefix) string {
	return fmt.Sprintf(`$ErrorActionPreference = 'Stop'
$hwk = NetTCPIP\Get-NetIPAddress -IPAddress %s -AddressFamily IPv4 -ErrorAction SilentlyContinue | Microsoft.PowerShell.Utility\Select-Object -First 1
if (-not $hwk) { [pscustomobject]@{ routed = $false; reason = 'no-gateway' }; return }
$elevated = (Microsoft.PowerShell.Utility\New-Object Security.Principal.WindowsPrincipal([Security.Principal.WindowsIdentity]::GetCurrent())).IsInRole([Security.Principal.WindowsBuiltInRole]::Administrator)
if (-not $elevated) { [pscustomobject]@{ routed = $false; reason = 'not-elevated' }; return }
$wsl = (NetTCPIP\Find-NetRoute -RemoteIPAddress %s | Microsoft.PowerShell.Utility\Select-Object -First 1).InterfaceIndex
NetTCPIP\Get-NetRoute -DestinationPrefix %s -PolicyStore ActiveStore -ErrorAction SilentlyContinue | NetTCPIP\Remove-NetRoute -Confirm:$false
NetTCPIP\New-NetRoute -DestinationPrefix %s -InterfaceIndex $wsl -NextHop %s -PolicyStore ActiveStore | Microsoft.PowerShell.Core\Out-Null
NetTCPIP\Set-NetIPInterface -InterfaceIndex $wsl -AddressFamily IPv4 -Forwarding Enabled
NetTCPIP\Set-NetIPInterface -InterfaceIndex $hwk.InterfaceIndex -AddressFamily IPv4 -Forwarding Enabled
if (Microsoft.PowerShell.Core\Get-Command -Module NetSecurity -Name New-NetFirewallHyperVRule -ErrorAction SilentlyContinue) {
    if (-not (NetSecurity\Get-NetFirewallHyperVRule -Name %s -ErrorAction SilentlyContinue)) {
        NetSecurity\New-NetFirewallHyperVRule -Name %s -DisplayName %s -Direction Inbound -VMCreatorId %s -RemoteAddresses %s -Action Allow | Microsoft.PowerShell.Core\Out-Null
    }
}
[pscustomobject]@{ routed = $true; reason = '' }
`, hyperv.Quote(gateway.String()), hyperv.Quote(vm.String()), hyperv.Quote(address.String()+"/32"), hyperv.Quote(address.String()+"/32"), hyperv.Quote(vm.String()),
		hyperv.Quote(firewallRule(cluster)), hyperv.Quote(firewallRule(cluster)), hyperv.Quote("hwk: cluster "+cluster+"'s node network into WSL"), hyperv.Quote(wslVMCreator), hyperv.Quote(subnet.Masked().String()))
}

// unrouteScript removes what routeScript made for the node at address of
// cluster, and reports what it had to keep for want of elevation.
func unrouteScript(cluster string, address netip.Addr) string {
	return fmt.Sprintf(`$ErrorActionPreference = 'Stop'
$elevated = (Microsoft.PowerShell.Utility\New-Object Security.Principal.WindowsPrincipal([Security.Principal.WindowsIdentity]::GetCurrent())).IsInRole([Security.Principal.WindowsBuiltInRole]::Administrator)
$kept = @()
$route = NetTCPIP\Get-NetRoute -DestinationPrefix %s -PolicyStore ActiveStore -ErrorAction SilentlyContinue
if ($route) { if ($elevated) { $route | NetTCPIP\Remove-NetRoute -Confirm:$false } else { $kept += 'route' } }
if (Microsoft.PowerShell.Core\Get-Command -Module NetSecurity -Name Get-NetFirewallHyperVRule -ErrorAction SilentlyContinue) {
    $rule = NetSecurity\Get-NetFirewallHyperVRule -Name %s -ErrorAction SilentlyContinue
    if ($rule) { if ($elevated) { $rule | NetSecurity\Remove-NetFirewallHyperVRule } else { $kept += 'firewall rule' } }
}
[pscustomobject]@{ kept = $kept }
`, hyperv.Quote(address.String()+"/32"), hyperv.Quote(firewallRule(cluster)))
}

func firewallRule(cluster string) string { return "hwk-wsl-" + cluster }

// Scripts returns every PowerShell script this package makes, for the check
// of every script hwk sends to Windows (internal/testing/pscatalog).
func Scripts() map[string]string {
	a, vm, gw := netip.MustParseAddr("172.31.250.10"), netip.MustParseAddr("172.24.96.5"), netip.MustParseAddr("172.31.250.1")
	return map[string]string{
		"routeScript":   routeScript("demo", a, vm, gw, netip.MustParsePrefix("172.31.250.0/24")),
		"unrouteScript": unrouteScript("demo", a),
	}
}

// vmAddress returns the address WSL gave the node's VM at this start; WSL
// configures it from outside while the distribution boots, so an empty
// answer is asked again.
func (d *Driver) vmAddress(ctx context.Context, n *node.Node) (netip.Addr, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out strings.Builder
		err := n.Run(ctx, node.Cmd{Args: []string{"sh", "-s", "hwk-vm-address"}, Stdin: strings.NewReader(vmAddressScript), Stdout: &out})
		if err != nil {
			return netip.Addr{}, err
		}
		if s := strings.TrimSpace(out.String()); s != "" {
			return netip.ParseAddr(s)
		}
		if time.Now().After(deadline) {
			return netip.Addr{}, fmt.Errorf("WSL gave the VM no address within 30s (`ip -4 route show default` in %s is empty)", DistroName(n.Name()))
		}
		select {
		case <-ctx.Done():
			return netip.Addr{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// route has the host route the node's address to its VM, when the
// cluster has a Hyper-V node network to route it from.
func (d *Driver) route(ctx context.Context, r drivers.Ref, mk *marker) error {
	if mk.Subnet == (netip.Prefix{}) {
		return nil // made without a node network
	}
	vm, err := d.vmAddress(ctx, d.handle(r))
	if err != nil {
		return fmt.Errorf("start node %s: %w", r.Name, err)
	}
	var out struct {
		Routed bool   `json:"routed"`
		Reason string `json:"reason"`
	}
	gw := drivers.Network{Subnet: mk.Subnet}.Gateway()
	if err := d.ps.Run(ctx, routeScript(r.Cluster, mk.IP, vm, gw, mk.Subnet), &out); err != nil {
		return fmt.Errorf("start node %s: route %s to WSL's VM (%s): %w", r.Name, mk.IP, vm, err)
	}
	if out.Reason == "not-elevated" {
		return &drivers.UnavailableError{Driver: config.DriverWSL2,
			Reason: fmt.Sprintf("node %s's address %s must be routed from hwk's Hyper-V switch to WSL's VM (%s at this start), and this PowerShell is not elevated", r.Name, mk.IP, vm),
			Fix:    "run hwk from an elevated terminal (Run as administrator); `hwk start` routes it again after a restart of WSL or Windows"}
	}
	return nil
}

// unroute removes the host's route and firewall rule of the node. What
// it cannot remove is a warning, not a failure: the route goes with the
// next restart of Windows, and a delete must not stay stuck on it.
func (d *Driver) unroute(ctx context.Context, r drivers.Ref, mk *marker) {
	if mk.Subnet == (netip.Prefix{}) {
		return
	}
	var out struct {
		Kept []string `json:"kept"`
	}
	if err := d.ps.Run(ctx, unrouteScript(r.Cluster, mk.IP), &out); err != nil {
		d.warn(fmt.Sprintf("node %s: could not remove the host's route to %s and its firewall rule (%v); the route goes at the next restart of Windows, `Remove-NetFirewallHyperVRule -Name %s` removes the rule",
			r.Name, mk.IP, err, firewallRule(r.Cluster)))
		return
	}
	if len(out.Kept) > 0 {
		d.warn(fmt.Sprintf("kept node %s's %s on the host: removing it needs an elevated terminal (the route goes at the next restart of Windows; `Remove-NetFirewallHyperVRule -Name %s` removes the rule)",
			r.Name, strings.Join(out.Kept, " and "), firewallRule(r.Cluster)))
	}
}
