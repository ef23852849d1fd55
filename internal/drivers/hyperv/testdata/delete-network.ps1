# --- script 1
$switch = Hyper-V\Get-VMSwitch -Name 'hwk' -ErrorAction SilentlyContinue
[pscustomobject]@{
    switch = $(if ($switch) { [string]$switch.SwitchType } else { '' })
    nat = @(NetNat\Get-NetNat -ErrorAction SilentlyContinue | Microsoft.PowerShell.Core\ForEach-Object { [pscustomobject]@{ name = $_.Name; prefix = $_.InternalIPInterfaceAddressPrefix } })
    addresses = @(NetTCPIP\Get-NetIPAddress -AddressFamily IPv4 -ErrorAction SilentlyContinue | Microsoft.PowerShell.Core\ForEach-Object { [pscustomobject]@{ alias = $_.InterfaceAlias; address = $_.IPAddress; prefix = [int]$_.PrefixLength } })
    elevated = (Microsoft.PowerShell.Utility\New-Object Security.Principal.WindowsPrincipal([Security.Principal.WindowsIdentity]::GetCurrent())).IsInRole([Security.Principal.WindowsBuiltInRole]::Administrator)
}
# --- script 2
$elevated = (Microsoft.PowerShell.Utility\New-Object Security.Principal.WindowsPrincipal([Security.Principal.WindowsIdentity]::GetCurrent())).IsInRole([Security.Principal.WindowsBuiltInRole]::Administrator)
$kept = @()
$ip = NetTCPIP\Get-NetIPAddress -InterfaceAlias 'vEthernet (hwk)' -IPAddress '172.31.250.1' -ErrorAction SilentlyContinue
if ($ip) { if ($elevated) { $ip | NetTCPIP\Remove-NetIPAddress -Confirm:$false } else { $kept += 'address' } }
$users = @(Hyper-V\Get-VM | Microsoft.PowerShell.Core\Where-Object { $_.Notes -like 'hwk:*' -and @($_.NetworkAdapters | Microsoft.PowerShell.Core\Where-Object { $_.SwitchName -eq 'hwk' }).Count -gt 0 })
if ($users.Count -eq 0) {
    if (Hyper-V\Get-VMSwitch -Name 'hwk' -ErrorAction SilentlyContinue) { Hyper-V\Remove-VMSwitch -Name 'hwk' -Force }
    $nat = NetNat\Get-NetNat -Name 'hwk' -ErrorAction SilentlyContinue
    if ($nat) { if ($elevated) { $nat | NetNat\Remove-NetNat -Confirm:$false } else { $kept += 'nat' } }
}
[pscustomobject]@{ kept = $kept }
