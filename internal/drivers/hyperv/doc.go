// Package hyperv runs nodes as Hyper-V virtual machines, the default on
// Windows 10/11 Pro and Enterprise: Generation 2 VMs on differencing
// disks over the cached node images, on hwk's own internal switch and
// NAT with static addresses (never the Default Switch, whose subnet moves
// on every reboot). Every host operation is a PowerShell script sent to
// one long-lived powershell.exe (Session); only starting it and reading
// a VM's serial pipe are Windows-only, the rest is tested on Linux.
//
// Files: driver.go, preflight.go (Preflight, CheckImage), network.go (the
// switch and NAT), machine.go (VMs: Create ... List), node.go (Node,
// HostEndpoint), files.go (a cluster's files), install.go (Installer),
// scripts.go (every script sent), powershell.go and session.go (the
// session), pipe.go, pipe_other.go and pipe_windows.go (a VM's COM1 pipe),
// console_other.go and console_windows.go (powershell.exe's console).
package hyperv
