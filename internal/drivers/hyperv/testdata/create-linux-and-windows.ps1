# --- script 1
$switch = Hyper-V\Get-VMSwitch -Name 'hwk' -ErrorAction SilentlyContinue
[pscustomobject]@{
    switch = $(if ($switch) { [string]$switch.SwitchType } else { '' })
    nat = @(NetNat\Get-NetNat -ErrorAction SilentlyContinue | Microsoft.PowerShell.Core\ForEach-Object { [pscustomobject]@{ name = $_.Name; prefix = $_.InternalIPInterfaceAddressPrefix } })
    addresses = @(NetTCPIP\Get-NetIPAddress -AddressFamily IPv4 -ErrorAction SilentlyContinue | Microsoft.PowerShell.Core\ForEach-Object { [pscustomobject]@{ alias = $_.InterfaceAlias; address = $_.IPAddress; prefix = [int]$_.PrefixLength } })
    elevated = (Microsoft.PowerShell.Utility\New-Object Security.Principal.WindowsPrincipal([Security.Principal.WindowsIdentity]::GetCurrent())).IsInRole([Security.Principal.WindowsBuiltInRole]::Administrator)
}
# --- script 2
Hyper-V\New-VMSwitch -Name 'hwk' -SwitchType Internal -Notes 'hwk: the NAT network of hwk''s Hyper-V nodes' | Microsoft.PowerShell.Core\Out-Null

# --- script 3
NetTCPIP\Get-NetIPInterface -InterfaceAlias 'vEthernet (hwk)' -AddressFamily IPv4 | Microsoft.PowerShell.Core\Out-Null
NetTCPIP\New-NetIPAddress -InterfaceAlias 'vEthernet (hwk)' -IPAddress '172.31.250.1' -PrefixLength 24 | Microsoft.PowerShell.Core\Out-Null
NetNat\New-NetNat -Name 'hwk' -InternalIPInterfaceAddressPrefix '172.31.0.0/16' | Microsoft.PowerShell.Core\Out-Null

# --- script 4
$vm = Hyper-V\Get-VM -Name 'demo-cp' -ErrorAction SilentlyContinue
$image = Hyper-V\Get-VHD -Path 'C:\hwk\cache\images\linux\disk.vhdx'
Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path 'C:\hwk\clusters\demo\hyperv\demo-cp' | Microsoft.PowerShell.Core\Out-Null
$drive = Microsoft.PowerShell.Utility\New-Object System.IO.DriveInfo([System.IO.Path]::GetPathRoot('C:\hwk\clusters\demo\hyperv\demo-cp'))
$route = NetTCPIP\Get-NetRoute -DestinationPrefix '0.0.0.0/0' -ErrorAction SilentlyContinue | Microsoft.PowerShell.Utility\Sort-Object -Property RouteMetric | Microsoft.PowerShell.Utility\Select-Object -First 1
$dns = @()
if ($route) { $dns = @((DnsClient\Get-DnsClientServerAddress -InterfaceIndex $route.InterfaceIndex -AddressFamily IPv4).ServerAddresses) }
[pscustomobject]@{
    vm = $(if ($vm) { [string]$vm.Notes } else { $null })
    exists = [bool]$vm
    free = [int64]$drive.AvailableFreeSpace
    image = [int64]$image.Size
    dns = $dns
}
# --- script 5
if (Microsoft.PowerShell.Management\Test-Path -LiteralPath 'C:\hwk\clusters\demo\hyperv\demo-cp\disk.vhdx') { Microsoft.PowerShell.Management\Remove-Item -LiteralPath 'C:\hwk\clusters\demo\hyperv\demo-cp\disk.vhdx' -Force }
Hyper-V\New-VHD -Path 'C:\hwk\clusters\demo\hyperv\demo-cp\disk.vhdx' -ParentPath 'C:\hwk\cache\images\linux\disk.vhdx' -Differencing | Microsoft.PowerShell.Core\Out-Null
$vm = $null
try {
    $vm = Hyper-V\New-VM -Name 'demo-cp' -Generation 2 -MemoryStartupBytes 2147483648 -VHDPath 'C:\hwk\clusters\demo\hyperv\demo-cp\disk.vhdx' -SwitchName 'hwk' -Path 'C:\hwk\clusters\demo\hyperv\demo-cp'
    Hyper-V\Set-VM -VM $vm -ProcessorCount 2 -DynamicMemory -MemoryMinimumBytes 1073741824 -MemoryMaximumBytes 4294967296 -AutomaticCheckpointsEnabled $false -AutomaticStartAction Nothing -AutomaticStopAction ShutDown -Notes 'hwk:{"cluster":"demo","name":"demo-cp","role":"control-plane","os":"linux","ip":"172.31.250.10","partial":true}'
    Hyper-V\Set-VMNetworkAdapter -VM $vm -StaticMacAddress '00155D1FFA0A'
    Hyper-V\Set-VMFirmware -VM $vm -EnableSecureBoot Off
    $tpm = $false
    Hyper-V\Add-VMDvdDrive -VM $vm -Path 'C:\hwk\clusters\demo\hyperv\demo-cp\cidata.iso'
    Hyper-V\Set-VMComPort -VM $vm -Number 1 -Path '\\.\pipe\hwk-demo-cp'
    Hyper-V\Set-VMFirmware -VM $vm -FirstBootDevice (Hyper-V\Get-VMHardDiskDrive -VM $vm)
    Hyper-V\Set-VM -VM $vm -Notes 'hwk:{"cluster":"demo","name":"demo-cp","role":"control-plane","os":"linux","ip":"172.31.250.10"}'
    Hyper-V\Start-VM -VM $vm
} catch {
    if ($vm) {
        Hyper-V\Stop-VM -VM $vm -TurnOff -Force -ErrorAction SilentlyContinue
        Hyper-V\Remove-VM -VM $vm -Force -ErrorAction SilentlyContinue
    }
    Microsoft.PowerShell.Management\Remove-Item -LiteralPath 'C:\hwk\clusters\demo\hyperv\demo-cp\disk.vhdx' -Force -ErrorAction SilentlyContinue
    throw
}
[pscustomobject]@{ tpm = $tpm }
# --- script 6
$vm = Hyper-V\Get-VM -Name 'demo-win-1' -ErrorAction SilentlyContinue
$image = Hyper-V\Get-VHD -Path 'C:\hwk\cache\images\windows\disk.vhdx'
Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path 'C:\hwk\clusters\demo\hyperv\demo-win-1' | Microsoft.PowerShell.Core\Out-Null
$drive = Microsoft.PowerShell.Utility\New-Object System.IO.DriveInfo([System.IO.Path]::GetPathRoot('C:\hwk\clusters\demo\hyperv\demo-win-1'))
$route = NetTCPIP\Get-NetRoute -DestinationPrefix '0.0.0.0/0' -ErrorAction SilentlyContinue | Microsoft.PowerShell.Utility\Sort-Object -Property RouteMetric | Microsoft.PowerShell.Utility\Select-Object -First 1
$dns = @()
if ($route) { $dns = @((DnsClient\Get-DnsClientServerAddress -InterfaceIndex $route.InterfaceIndex -AddressFamily IPv4).ServerAddresses) }
[pscustomobject]@{
    vm = $(if ($vm) { [string]$vm.Notes } else { $null })
    exists = [bool]$vm
    free = [int64]$drive.AvailableFreeSpace
    image = [int64]$image.Size
    dns = $dns
}
# --- script 7
if (Microsoft.PowerShell.Management\Test-Path -LiteralPath 'C:\hwk\clusters\demo\hyperv\demo-win-1\disk.vhdx') { Microsoft.PowerShell.Management\Remove-Item -LiteralPath 'C:\hwk\clusters\demo\hyperv\demo-win-1\disk.vhdx' -Force }
Hyper-V\New-VHD -Path 'C:\hwk\clusters\demo\hyperv\demo-win-1\disk.vhdx' -ParentPath 'C:\hwk\cache\images\windows\disk.vhdx' -Differencing | Microsoft.PowerShell.Core\Out-Null
$vm = $null
try {
    Hyper-V\Resize-VHD -Path 'C:\hwk\clusters\demo\hyperv\demo-win-1\disk.vhdx' -SizeBytes 68719476736
    $vm = Hyper-V\New-VM -Name 'demo-win-1' -Generation 2 -MemoryStartupBytes 3221225472 -VHDPath 'C:\hwk\clusters\demo\hyperv\demo-win-1\disk.vhdx' -SwitchName 'hwk' -Path 'C:\hwk\clusters\demo\hyperv\demo-win-1'
    Hyper-V\Set-VM -VM $vm -ProcessorCount 2 -DynamicMemory -MemoryMinimumBytes 1073741824 -MemoryMaximumBytes 6442450944 -AutomaticCheckpointsEnabled $false -AutomaticStartAction StartIfRunning -AutomaticStopAction ShutDown -Notes 'hwk:{"cluster":"demo","name":"demo-win-1","role":"worker","os":"windows","ip":"172.31.250.11","partial":true}'
    Hyper-V\Set-VMNetworkAdapter -VM $vm -StaticMacAddress '00155D1FFA0B'
    Hyper-V\Set-VMFirmware -VM $vm -EnableSecureBoot On -SecureBootTemplate MicrosoftWindows
    $tpm = $false
    try {
        Hyper-V\Set-VMKeyProtector -VM $vm -NewLocalKeyProtector
        Hyper-V\Enable-VMTPM -VM $vm
        $tpm = $true
    } catch { $tpm = $false }
    Hyper-V\Add-VMDvdDrive -VM $vm -Path 'C:\hwk\clusters\demo\hyperv\demo-win-1\cidata.iso'
    Hyper-V\Set-VMComPort -VM $vm -Number 1 -Path '\\.\pipe\hwk-demo-win-1'
    Hyper-V\Set-VMFirmware -VM $vm -FirstBootDevice (Hyper-V\Get-VMHardDiskDrive -VM $vm)
    Hyper-V\Set-VM -VM $vm -Notes 'hwk:{"cluster":"demo","name":"demo-win-1","role":"worker","os":"windows","ip":"172.31.250.11"}'
    Hyper-V\Start-VM -VM $vm
} catch {
    if ($vm) {
        Hyper-V\Stop-VM -VM $vm -TurnOff -Force -ErrorAction SilentlyContinue
        Hyper-V\Remove-VM -VM $vm -Force -ErrorAction SilentlyContinue
    }
    Microsoft.PowerShell.Management\Remove-Item -LiteralPath 'C:\hwk\clusters\demo\hyperv\demo-win-1\disk.vhdx' -Force -ErrorAction SilentlyContinue
    throw
}
[pscustomobject]@{ tpm = $tpm }
