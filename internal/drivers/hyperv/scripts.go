package hyperv

import (
	"fmt"
	"net/netip"
	"strings"
)

// Every script the driver sends is made here, cmdlets qualified by their
// module (Hyper-V\, NetNat\, NetTCPIP\) so that a function or alias of the
// same name in the user's environment cannot stand in for them. Values
// reach PowerShell only through quote or as numbers.

// Names of what the driver makes on the host. One internal switch and
// one NAT serve every hwk cluster: Windows has allowed one NAT prefix per
// host for most of its life, so hwk's NAT covers natPrefix, and each
// cluster's subnet inside it gets its gateway address on the switch's
// host adapter.
const (
	switchName = "hwk"
	natName    = "hwk"
	// notesPrefix starts the Notes of every VM hwk makes: hwk's metadata.
	notesPrefix = "hwk:"
)

// natPrefix is the range hwk's NAT covers; every Hyper-V cluster's node
// subnet must lie inside it (the default 172.31.250.0/24 does).
var natPrefix = netip.MustParsePrefix("172.31.0.0/16")

// adapterAlias is the host's adapter on hwk's switch.
const adapterAlias = "vEthernet (" + switchName + ")"

// preflightScript gathers what Preflight judges, in one round trip.
func preflightScript() string {
	return `$cs = CimCmdlets\Get-CimInstance -ClassName Win32_ComputerSystem
$feature = CimCmdlets\Get-CimInstance -ClassName Win32_OptionalFeature -Filter "Name='Microsoft-Hyper-V-Hypervisor'"
$id = [Security.Principal.WindowsIdentity]::GetCurrent()
$principal = Microsoft.PowerShell.Utility\New-Object Security.Principal.WindowsPrincipal($id)
$vmms = Microsoft.PowerShell.Management\Get-Service -Name vmms -ErrorAction SilentlyContinue
[pscustomobject]@{
    build = [Environment]::OSVersion.Version.Build
    hypervisorPresent = [bool]$cs.HypervisorPresent
    featureState = $(if ($feature) { [int]$feature.InstallState } else { 0 })
    module = [bool](Microsoft.PowerShell.Core\Get-Module -ListAvailable -Name Hyper-V)
    rebootPending = (Microsoft.PowerShell.Management\Test-Path -LiteralPath 'HKLM:\SOFTWARE\Microsoft\Windows\CurrentVersion\Component Based Servicing\RebootPending')
    vmms = $(if ($vmms) { [string]$vmms.Status } else { '' })
    elevated = $principal.IsInRole([Security.Principal.WindowsBuiltInRole]::Administrator)
    hypervAdmin = [bool]($id.Groups | Microsoft.PowerShell.Core\Where-Object { $_.Value -eq 'S-1-5-32-578' })
    virtualBox = [bool](Microsoft.PowerShell.Management\Get-Process -Name 'VirtualBoxVM', 'VBoxHeadless', 'VBoxSVC' -ErrorAction SilentlyContinue)
    nats = @(NetNat\Get-NetNat -ErrorAction SilentlyContinue | Microsoft.PowerShell.Core\ForEach-Object { [pscustomobject]@{ name = $_.Name; prefix = $_.InternalIPInterfaceAddressPrefix } })
}`
}

// networkFactsScript reports hwk's switch, NAT and addresses, and every
// other IPv4 address of the host (VPNs, other switches) for conflicts.
func networkFactsScript() string {
	return `$switch = Hyper-V\Get-VMSwitch -Name ` + quote(switchName) + ` -ErrorAction SilentlyContinue
[pscustomobject]@{
    switch = $(if ($switch) { [string]$switch.SwitchType } else { '' })
    nat = @(NetNat\Get-NetNat -ErrorAction SilentlyContinue | Microsoft.PowerShell.Core\ForEach-Object { [pscustomobject]@{ name = $_.Name; prefix = $_.InternalIPInterfaceAddressPrefix } })
    addresses = @(NetTCPIP\Get-NetIPAddress -AddressFamily IPv4 -ErrorAction SilentlyContinue | Microsoft.PowerShell.Core\ForEach-Object { [pscustomobject]@{ alias = $_.InterfaceAlias; address = $_.IPAddress; prefix = [int]$_.PrefixLength } })
    elevated = (Microsoft.PowerShell.Utility\New-Object Security.Principal.WindowsPrincipal([Security.Principal.WindowsIdentity]::GetCurrent())).IsInRole([Security.Principal.WindowsBuiltInRole]::Administrator)
}`
}

// switchScript makes hwk's internal switch.
func switchScript() string {
	return fmt.Sprintf("Hyper-V\\New-VMSwitch -Name %s -SwitchType Internal -Notes %s | Microsoft.PowerShell.Core\\Out-Null\n",
		quote(switchName), quote("hwk: the NAT network of hwk's Hyper-V nodes"))
}

// addressScript puts the cluster's gateway address on the host's adapter
// to hwk's switch and makes hwk's NAT, each when asked. The adapter's
// IPv4 interface is asked for first: it may appear only after
// New-VMSwitch has returned, and until then the script fails with the
// not-found error (adapterMissing) that EnsureNetwork waits out.
func addressScript(gateway netip.Addr, bits int, addAddress, makeNAT bool) string {
	var b strings.Builder
	if addAddress {
		fmt.Fprintf(&b, "NetTCPIP\\Get-NetIPInterface -InterfaceAlias %s -AddressFamily IPv4 | Microsoft.PowerShell.Core\\Out-Null\n", quote(adapterAlias))
		fmt.Fprintf(&b, "NetTCPIP\\New-NetIPAddress -InterfaceAlias %s -IPAddress %s -PrefixLength %d | Microsoft.PowerShell.Core\\Out-Null\n",
			quote(adapterAlias), quote(gateway.String()), bits)
	}
	if makeNAT {
		fmt.Fprintf(&b, "NetNat\\New-NetNat -Name %s -InternalIPInterfaceAddressPrefix %s | Microsoft.PowerShell.Core\\Out-Null\n",
			quote(natName), quote(natPrefix.String()))
	}
	return b.String()
}

// deleteNetworkScript removes the cluster's gateway address, and the
// switch and NAT when no hwk VM is left on the switch. Without
// elevation what needs it stays, and the reply reports it.
func deleteNetworkScript(gateway netip.Addr) string {
	var b strings.Builder
	b.WriteString(`$elevated = (Microsoft.PowerShell.Utility\New-Object Security.Principal.WindowsPrincipal([Security.Principal.WindowsIdentity]::GetCurrent())).IsInRole([Security.Principal.WindowsBuiltInRole]::Administrator)
$kept = @()
`)
	fmt.Fprintf(&b, `$ip = NetTCPIP\Get-NetIPAddress -InterfaceAlias %s -IPAddress %s -ErrorAction SilentlyContinue
if ($ip) { if ($elevated) { $ip | NetTCPIP\Remove-NetIPAddress -Confirm:$false } else { $kept += 'address' } }
`, quote(adapterAlias), quote(gateway.String()))
	fmt.Fprintf(&b, `$users = @(Hyper-V\Get-VM | Microsoft.PowerShell.Core\Where-Object { $_.Notes -like %s -and @($_.NetworkAdapters | Microsoft.PowerShell.Core\Where-Object { $_.SwitchName -eq %s }).Count -gt 0 })
if ($users.Count -eq 0) {
    if (Hyper-V\Get-VMSwitch -Name %s -ErrorAction SilentlyContinue) { Hyper-V\Remove-VMSwitch -Name %s -Force }
    $nat = NetNat\Get-NetNat -Name %s -ErrorAction SilentlyContinue
    if ($nat) { if ($elevated) { $nat | NetNat\Remove-NetNat -Confirm:$false } else { $kept += 'nat' } }
}
[pscustomobject]@{ kept = $kept }`,
		quote(notesPrefix+"*"), quote(switchName), quote(switchName), quote(switchName), quote(natName))
	return b.String()
}

// vmFields turns $vm into what inspect reads; State is cast, since
// PowerShell 5.1 writes enums as numbers.
const vmFields = `[pscustomobject]@{ name = $vm.Name; state = [string]$vm.State; notes = [string]$vm.Notes; ips = @($vm.NetworkAdapters | Microsoft.PowerShell.Core\ForEach-Object { $_.IPAddresses }) }`

// inspectScript reports the VM named, or nothing.
func inspectScript(name string) string {
	return `$vm = Hyper-V\Get-VM -Name ` + quote(name) + ` -ErrorAction SilentlyContinue
if ($vm) { ` + vmFields + ` }`
}

// listScript reports every VM hwk made.
func listScript() string {
	return `@(Hyper-V\Get-VM | Microsoft.PowerShell.Core\Where-Object { $_.Notes -like ` + quote(notesPrefix+"*") + ` } | Microsoft.PowerShell.Core\ForEach-Object { $vm = $_; ` + vmFields + ` })`
}

// createFactsScript reports what Create checks before it makes anything:
// a VM of the name, the free space where the disk goes, the virtual size
// of the node image the disk is made over, and the host's DNS servers
// (hwk's NAT has none of its own).
func createFactsScript(name, dir, image string) string {
	return `$vm = Hyper-V\Get-VM -Name ` + quote(name) + ` -ErrorAction SilentlyContinue
$image = Hyper-V\Get-VHD -Path ` + quote(image) + `
Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path ` + quote(dir) + ` | Microsoft.PowerShell.Core\Out-Null
$drive = Microsoft.PowerShell.Utility\New-Object System.IO.DriveInfo([System.IO.Path]::GetPathRoot(` + quote(dir) + `))
$route = NetTCPIP\Get-NetRoute -DestinationPrefix '0.0.0.0/0' -ErrorAction SilentlyContinue | Microsoft.PowerShell.Utility\Sort-Object -Property RouteMetric | Microsoft.PowerShell.Utility\Select-Object -First 1
$dns = @()
if ($route) { $dns = @((DnsClient\Get-DnsClientServerAddress -InterfaceIndex $route.InterfaceIndex -AddressFamily IPv4).ServerAddresses) }
[pscustomobject]@{
    vm = $(if ($vm) { [string]$vm.Notes } else { $null })
    exists = [bool]$vm
    free = [int64]$drive.AvailableFreeSpace
    image = [int64]$image.Size
    dns = $dns
}`
}

// vmSpec is what createScript makes.
type vmSpec struct {
	Name, Dir, Disk, Parent, Seed string
	// The VM's Dynamic Memory: it starts with StartupBytes, and Hyper-V
	// gives it more as the guest asks, up to MemoryBytes, and takes back
	// what it does not use, down to MinimumBytes.
	MemoryBytes, StartupBytes, MinimumBytes int64
	CPUs                                    int
	MAC                                     string // Hyper-V's form, 00155D1FFA0A
	// DiskBytes, when not 0, is the size the node's disk is grown to
	// from its image's: a differencing disk starts at its parent's.
	DiskBytes int64
	// Notes mark the VM hwk's while it is made (Partial) and once it is
	// (Notes): a VM whose Notes still say partial was cut off half-way.
	Partial, Notes string
	Windows        bool
	Start          bool
	// Autostart starts the VM with the host if it was running when the
	// host went down; otherwise it stays off until hwk start.
	Autostart bool
}

// startAction returns what Hyper-V does with the VM when the host starts:
// StartIfRunning brings back what was running (a VM hwk stop stopped
// stays off); Nothing leaves it to hwk start. New-VM's own default is
// StartIfRunning.
func startAction(autostart bool) string {
	if autostart {
		return "StartIfRunning"
	}
	return "Nothing"
}

// createScript returns the script that makes a node's VM: a differencing
// disk over the golden image (grown to DiskBytes when given), a Generation
// 2 VM on hwk's switch with Dynamic Memory and a static MAC, its seed ISO
// as a DVD, COM1 on a named pipe, and Secure Boot as the OS wants it. The
// script reports whether a vTPM was added.
func createScript(s vmSpec) string {
	var b strings.Builder
	// The differencing disk New-VHD makes is its parent's size. Resize-VHD
	// grows it before any VM has it, so the guest finds the whole disk at
	// its first boot and grows its partition into it (Linux:
	// systemd-repart; Windows: hwk-seed).
	if s.DiskBytes > 0 {
		fmt.Fprintf(&b, "Hyper-V\\Resize-VHD -Path %s -SizeBytes %d\n", quote(s.Disk), s.DiskBytes)
	}
	// Until Set-VM gives it hwk's Notes, a VM cannot be told from the
	// user's: one made half-way would hold the node's name against the
	// next try and against down. So whatever fails removes what was made,
	// and the error goes on as it was. What the catch cannot cover (the
	// PowerShell process killed mid-script) leaves Notes that say partial,
	// which the next Create replaces.
	fmt.Fprintf(&b, `$vm = Hyper-V\New-VM -Name %[1]s -Generation 2 -MemoryStartupBytes %[2]d -VHDPath %[3]s -SwitchName %[4]s -Path %[5]s
Hyper-V\Set-VM -VM $vm -ProcessorCount %[6]d -DynamicMemory -MemoryMinimumBytes %[10]d -MemoryMaximumBytes %[11]d -AutomaticCheckpointsEnabled $false -AutomaticStartAction %[9]s -AutomaticStopAction ShutDown -Notes %[7]s
Hyper-V\Set-VMNetworkAdapter -VM $vm -StaticMacAddress %[8]s
`, quote(s.Name), s.StartupBytes, quote(s.Disk), quote(switchName), quote(s.Dir), s.CPUs, quote(s.Partial), quote(s.MAC), startAction(s.Autostart), s.MinimumBytes, s.MemoryBytes)
	// Secure Boot: Windows with Microsoft's template (and a vTPM where the
	// host can give one); Linux off, since hwk's Linux image boots an
	// unsigned systemd-boot.
	if s.Windows {
		b.WriteString(`Hyper-V\Set-VMFirmware -VM $vm -EnableSecureBoot On -SecureBootTemplate MicrosoftWindows
$tpm = $false
try {
    Hyper-V\Set-VMKeyProtector -VM $vm -NewLocalKeyProtector
    Hyper-V\Enable-VMTPM -VM $vm
    $tpm = $true
} catch { $tpm = $false }
`)
	} else {
		b.WriteString("Hyper-V\\Set-VMFirmware -VM $vm -EnableSecureBoot Off\n$tpm = $false\n")
	}
	fmt.Fprintf(&b, `Hyper-V\Add-VMDvdDrive -VM $vm -Path %s
Hyper-V\Set-VMComPort -VM $vm -Number 1 -Path %s
Hyper-V\Set-VMFirmware -VM $vm -FirstBootDevice (Hyper-V\Get-VMHardDiskDrive -VM $vm)
Hyper-V\Set-VM -VM $vm -Notes %s
`, quote(s.Seed), quote(pipeName(s.Name)), quote(s.Notes))
	if s.Start {
		b.WriteString("Hyper-V\\Start-VM -VM $vm\n")
	}
	body := strings.TrimSuffix(b.String(), "\n")
	return fmt.Sprintf(`if (Microsoft.PowerShell.Management\Test-Path -LiteralPath %[1]s) { Microsoft.PowerShell.Management\Remove-Item -LiteralPath %[1]s -Force }
Hyper-V\New-VHD -Path %[1]s -ParentPath %[2]s -Differencing | Microsoft.PowerShell.Core\Out-Null
$vm = $null
try {
    %[3]s
} catch {
    if ($vm) {
        Hyper-V\Stop-VM -VM $vm -TurnOff -Force -ErrorAction SilentlyContinue
        Hyper-V\Remove-VM -VM $vm -Force -ErrorAction SilentlyContinue
    }
    Microsoft.PowerShell.Management\Remove-Item -LiteralPath %[1]s -Force -ErrorAction SilentlyContinue
    throw
}
[pscustomobject]@{ tpm = $tpm }`, quote(s.Disk), quote(s.Parent), strings.ReplaceAll(body, "\n", "\n    "))
}

// pipeName returns the named pipe a VM's COM1 is connected to.
func pipeName(vm string) string { return `\\.\pipe\hwk-` + vm }

// startScript starts the VM unless it runs.
func startScript(name string) string {
	return `$vm = Hyper-V\Get-VM -Name ` + quote(name) + `
if ($vm.State -ne 'Running') { Hyper-V\Start-VM -VM $vm }`
}

// stopScript shuts the guest down through the Shutdown integration
// service, and turns the VM off if it has not stopped after grace
// seconds. A stopped or missing VM is left alone.
func stopScript(name string, grace int) string {
	return fmt.Sprintf(`$vm = Hyper-V\Get-VM -Name %s -ErrorAction SilentlyContinue
if ($vm -and $vm.State -ne 'Off') {
    $job = Hyper-V\Stop-VM -VM $vm -Force -AsJob
    if (-not (Microsoft.PowerShell.Core\Wait-Job -Job $job -Timeout %d)) {
        Microsoft.PowerShell.Core\Stop-Job -Job $job
        Hyper-V\Stop-VM -VM $vm -TurnOff -Force
    }
    Microsoft.PowerShell.Core\Remove-Job -Job $job -Force
}`, quote(name), grace)
}

// deleteScript turns off and removes the VM named (none when name is
// empty), then the node's directory (disk, seed, Hyper-V's files). Only a
// VM whose Notes are hwk's is touched.
func deleteScript(name, dir string) string {
	s := ""
	if name != "" {
		s = fmt.Sprintf(`$vm = Hyper-V\Get-VM -Name %s -ErrorAction SilentlyContinue
if ($vm -and $vm.Notes -like %s) {
    if ($vm.State -ne 'Off') { Hyper-V\Stop-VM -VM $vm -TurnOff -Force }
    Hyper-V\Remove-VM -VM $vm -Force
}
`, quote(name), quote(notesPrefix+"*"))
	}
	return s + fmt.Sprintf("if (Microsoft.PowerShell.Management\\Test-Path -LiteralPath %[1]s) { Microsoft.PowerShell.Management\\Remove-Item -LiteralPath %[1]s -Recurse -Force }", quote(dir))
}

// installScript makes the install VM of a Windows image build: a new
// dynamic VHDX, no network, the media as DVDs with the first one booted
// first, Secure Boot with Microsoft's Windows template, COM1 on a pipe.
func installScript(name, dir, disk string, bytes int64, cpus int, memory int64, media []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path %[1]s | Microsoft.PowerShell.Core\Out-Null
if (Microsoft.PowerShell.Management\Test-Path -LiteralPath %[2]s) { Microsoft.PowerShell.Management\Remove-Item -LiteralPath %[2]s -Force }
Hyper-V\New-VHD -Path %[2]s -SizeBytes %[3]d -Dynamic | Microsoft.PowerShell.Core\Out-Null
$vm = Hyper-V\New-VM -Name %[4]s -Generation 2 -MemoryStartupBytes %[5]d -VHDPath %[2]s -Path %[1]s
Hyper-V\Set-VM -VM $vm -ProcessorCount %[6]d -StaticMemory -AutomaticCheckpointsEnabled $false -Notes %[7]s
Hyper-V\Set-VMFirmware -VM $vm -EnableSecureBoot On -SecureBootTemplate MicrosoftWindows
Hyper-V\Get-VMNetworkAdapter -VM $vm | Hyper-V\Remove-VMNetworkAdapter
`, quote(dir), quote(disk), bytes, quote(name), memory, cpus, quote(notesPrefix+`{"build":true}`))
	for i, m := range media {
		fmt.Fprintf(&b, "$dvd%d = Hyper-V\\Add-VMDvdDrive -VM $vm -Path %s -Passthru\n", i, quote(m))
	}
	fmt.Fprintf(&b, `Hyper-V\Set-VMFirmware -VM $vm -FirstBootDevice $dvd0
Hyper-V\Set-VMComPort -VM $vm -Number 1 -Path %s
Hyper-V\Start-VM -VM $vm`, quote(pipeName(name)))
	return b.String()
}

// pressKeyScript types the space bar into the VM every second for
// seconds: the answer to "Press any key to boot from CD or DVD", through
// the VM's Msvm_Keyboard (root\virtualization\v2).
func pressKeyScript(name string, seconds int) string {
	return fmt.Sprintf(`$vm = Hyper-V\Get-VM -Name %s
$kb = CimCmdlets\Get-CimInstance -Namespace 'root\virtualization\v2' -ClassName Msvm_Keyboard -Filter "SystemName='$($vm.Id)'"
for ($i = 0; $i -lt %d; $i++) {
    CimCmdlets\Invoke-CimMethod -InputObject $kb -MethodName TypeKey -Arguments @{ keyCode = [uint32]0x20 } | Microsoft.PowerShell.Core\Out-Null
    Microsoft.PowerShell.Utility\Start-Sleep -Seconds 1
}`, quote(name), seconds)
}

// stateScript reports the VM's state, or "" when it is gone.
func stateScript(name string) string {
	return `$vm = Hyper-V\Get-VM -Name ` + quote(name) + ` -ErrorAction SilentlyContinue
if ($vm) { [string]$vm.State } else { '' }`
}

// removeInstallScript removes the install VM, keeping its disk when
// keepDisk (the image) and removing it otherwise.
func removeInstallScript(name, disk string, keepDisk bool) string {
	s := fmt.Sprintf(`$vm = Hyper-V\Get-VM -Name %s -ErrorAction SilentlyContinue
if ($vm) {
    if ($vm.State -ne 'Off') { Hyper-V\Stop-VM -VM $vm -TurnOff -Force }
    Hyper-V\Remove-VM -VM $vm -Force
}`, quote(name))
	if !keepDisk {
		s += fmt.Sprintf("\nif (Microsoft.PowerShell.Management\\Test-Path -LiteralPath %[1]s) { Microsoft.PowerShell.Management\\Remove-Item -LiteralPath %[1]s -Force }", quote(disk))
	}
	return s
}

// Scripts returns every script the driver sends, one of each variant, as the
// session sends it (wrapped), by the declarations that make it: for the
// check of every script hwk sends to Windows (internal/testing/pscatalog).
func Scripts() map[string]string {
	gw := netip.MustParseAddr("172.31.250.1")
	spec := vmSpec{Name: "demo-cp", Dir: `C:\hwk\demo-cp`, Disk: `C:\hwk\demo-cp\disk.vhdx`, Parent: `C:\cache\disk.vhdx`, Seed: `C:\hwk\demo-cp\cidata.iso`,
		MemoryBytes: 4 << 30, StartupBytes: 2 << 30, MinimumBytes: 1 << 30, CPUs: 2, MAC: "00155D1FFA0A", Partial: `hwk:{"cluster":"demo","partial":true}`, Notes: `hwk:{"cluster":"demo"}`, Start: true}
	win := spec
	win.Windows = true
	grow := win
	grow.DiskBytes = 64 << 30
	out := map[string]string{}
	for name, s := range map[string]string{
		"preflightScript":          preflightScript(),
		"networkFactsScript":       networkFactsScript(),
		"switchScript":             switchScript(),
		"addressScript":            addressScript(gw, 24, true, true),
		"deleteNetworkScript":      deleteNetworkScript(gw),
		"inspectScript+vmFields":   inspectScript("demo-cp"),
		"listScript+vmFields":      listScript(),
		"createFactsScript":        createFactsScript("demo-cp", `C:\hwk\demo-cp`, `C:\cache\disk.vhdx`),
		"createScript/linux":       createScript(spec),
		"createScript/windows":     createScript(win),
		"createScript/grow":        createScript(grow),
		"startScript":              startScript("demo-cp"),
		"stopScript":               stopScript("demo-cp", StopGrace),
		"deleteScript":             deleteScript("demo-cp", `C:\hwk\demo-cp`),
		"deleteScript/files":       deleteScript("", `C:\hwk\demo-cp`),
		"installScript":            installScript("hwk-build-x", `C:\cache\hwk-build-x`, `C:\cache\disk.vhdx`, 40<<30, 2, 4<<30, []string{`C:\iso\server.iso`, `C:\cache\build.iso`}),
		"pressKeyScript":           pressKeyScript("hwk-build-x", pressSeconds),
		"stateScript":              stateScript("hwk-build-x"),
		"removeInstallScript":      removeInstallScript("hwk-build-x", `C:\cache\disk.vhdx`, false),
		"removeInstallScript/keep": removeInstallScript("hwk-build-x", `C:\cache\disk.vhdx`, true),
	} {
		out[name+"+Wrap"] = Wrap(s)
	}
	out["sessionSetup"] = sessionSetup
	out["requestLine"] = requestLine("Microsoft.PowerShell.Utility\\Write-Output 1")
	return out
}
