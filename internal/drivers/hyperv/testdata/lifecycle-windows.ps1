# --- script 1
$vm = Hyper-V\Get-VM -Name 'demo-win-1' -ErrorAction SilentlyContinue
if ($vm) { [pscustomobject]@{ name = $vm.Name; state = [string]$vm.State; notes = [string]$vm.Notes; ips = @($vm.NetworkAdapters | Microsoft.PowerShell.Core\ForEach-Object { $_.IPAddresses }) } }
# --- script 2
$vm = Hyper-V\Get-VM -Name 'demo-win-1'
if ($vm.State -ne 'Running') { Hyper-V\Start-VM -VM $vm }
# --- script 3
$vm = Hyper-V\Get-VM -Name 'demo-win-1'
if ($vm.State -ne 'Running') { Hyper-V\Start-VM -VM $vm }
# --- script 4
$vm = Hyper-V\Get-VM -Name 'demo-win-1' -ErrorAction SilentlyContinue
if ($vm -and $vm.State -ne 'Off') {
    $job = Hyper-V\Stop-VM -VM $vm -Force -AsJob
    if (-not (Microsoft.PowerShell.Core\Wait-Job -Job $job -Timeout 60)) {
        Microsoft.PowerShell.Core\Stop-Job -Job $job
        Hyper-V\Stop-VM -VM $vm -TurnOff -Force
    }
    Microsoft.PowerShell.Core\Remove-Job -Job $job -Force
}
# --- script 5
$vm = Hyper-V\Get-VM -Name 'demo-win-1' -ErrorAction SilentlyContinue
if ($vm -and $vm.State -ne 'Off') {
    $job = Hyper-V\Stop-VM -VM $vm -Force -AsJob
    if (-not (Microsoft.PowerShell.Core\Wait-Job -Job $job -Timeout 60)) {
        Microsoft.PowerShell.Core\Stop-Job -Job $job
        Hyper-V\Stop-VM -VM $vm -TurnOff -Force
    }
    Microsoft.PowerShell.Core\Remove-Job -Job $job -Force
}
# --- script 6
$vm = Hyper-V\Get-VM -Name 'demo-win-1' -ErrorAction SilentlyContinue
if ($vm) { [pscustomobject]@{ name = $vm.Name; state = [string]$vm.State; notes = [string]$vm.Notes; ips = @($vm.NetworkAdapters | Microsoft.PowerShell.Core\ForEach-Object { $_.IPAddresses }) } }
# --- script 7
$vm = Hyper-V\Get-VM -Name 'demo-win-1' -ErrorAction SilentlyContinue
if ($vm) { [pscustomobject]@{ name = $vm.Name; state = [string]$vm.State; notes = [string]$vm.Notes; ips = @($vm.NetworkAdapters | Microsoft.PowerShell.Core\ForEach-Object { $_.IPAddresses }) } }
# --- script 8
@(Hyper-V\Get-VM | Microsoft.PowerShell.Core\Where-Object { $_.Notes -like 'hwk:*' } | Microsoft.PowerShell.Core\ForEach-Object { $vm = $_; [pscustomobject]@{ name = $vm.Name; state = [string]$vm.State; notes = [string]$vm.Notes; ips = @($vm.NetworkAdapters | Microsoft.PowerShell.Core\ForEach-Object { $_.IPAddresses }) } })
# --- script 9
$vm = Hyper-V\Get-VM -Name 'demo-win-1' -ErrorAction SilentlyContinue
if ($vm) { [pscustomobject]@{ name = $vm.Name; state = [string]$vm.State; notes = [string]$vm.Notes; ips = @($vm.NetworkAdapters | Microsoft.PowerShell.Core\ForEach-Object { $_.IPAddresses }) } }
# --- script 10
$vm = Hyper-V\Get-VM -Name 'demo-win-1' -ErrorAction SilentlyContinue
if ($vm -and $vm.Notes -like 'hwk:*') {
    if ($vm.State -ne 'Off') { Hyper-V\Stop-VM -VM $vm -TurnOff -Force }
    Hyper-V\Remove-VM -VM $vm -Force
}
if (Microsoft.PowerShell.Management\Test-Path -LiteralPath 'C:\hwk\clusters\demo\hyperv\demo-win-1') { Microsoft.PowerShell.Management\Remove-Item -LiteralPath 'C:\hwk\clusters\demo\hyperv\demo-win-1' -Recurse -Force }
# --- script 11
$vm = Hyper-V\Get-VM -Name 'demo-win-1' -ErrorAction SilentlyContinue
if ($vm) { [pscustomobject]@{ name = $vm.Name; state = [string]$vm.State; notes = [string]$vm.Notes; ips = @($vm.NetworkAdapters | Microsoft.PowerShell.Core\ForEach-Object { $_.IPAddresses }) } }
# --- script 12
$vm = Hyper-V\Get-VM -Name 'demo-win-1' -ErrorAction SilentlyContinue
if ($vm -and $vm.Notes -like 'hwk:*') {
    if ($vm.State -ne 'Off') { Hyper-V\Stop-VM -VM $vm -TurnOff -Force }
    Hyper-V\Remove-VM -VM $vm -Force
}
if (Microsoft.PowerShell.Management\Test-Path -LiteralPath 'C:\hwk\clusters\demo\hyperv\demo-win-1') { Microsoft.PowerShell.Management\Remove-Item -LiteralPath 'C:\hwk\clusters\demo\hyperv\demo-win-1' -Recurse -Force }
# --- script 13
$vm = Hyper-V\Get-VM -Name 'demo-win-1' -ErrorAction SilentlyContinue
if ($vm) { [pscustomobject]@{ name = $vm.Name; state = [string]$vm.State; notes = [string]$vm.Notes; ips = @($vm.NetworkAdapters | Microsoft.PowerShell.Core\ForEach-Object { $_.IPAddresses }) } }
# --- script 14
if (Microsoft.PowerShell.Management\Test-Path -LiteralPath 'C:\hwk\clusters\demo\hyperv\demo-win-1') { Microsoft.PowerShell.Management\Remove-Item -LiteralPath 'C:\hwk\clusters\demo\hyperv\demo-win-1' -Recurse -Force }
