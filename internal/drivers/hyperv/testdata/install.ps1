# --- script 1
$vm = Hyper-V\Get-VM -Name 'hwk-build-x' -ErrorAction SilentlyContinue
if ($vm) {
    if ($vm.State -ne 'Off') { Hyper-V\Stop-VM -VM $vm -TurnOff -Force }
    Hyper-V\Remove-VM -VM $vm -Force
}
if (Microsoft.PowerShell.Management\Test-Path -LiteralPath 'C:\hwk\disk.vhdx') { Microsoft.PowerShell.Management\Remove-Item -LiteralPath 'C:\hwk\disk.vhdx' -Force }
# --- script 2
Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path 'C:\hwk\hwk-build-x' | Microsoft.PowerShell.Core\Out-Null
if (Microsoft.PowerShell.Management\Test-Path -LiteralPath 'C:\hwk\disk.vhdx') { Microsoft.PowerShell.Management\Remove-Item -LiteralPath 'C:\hwk\disk.vhdx' -Force }
Hyper-V\New-VHD -Path 'C:\hwk\disk.vhdx' -SizeBytes 42949672960 -Dynamic | Microsoft.PowerShell.Core\Out-Null
$vm = Hyper-V\New-VM -Name 'hwk-build-x' -Generation 2 -MemoryStartupBytes 4294967296 -VHDPath 'C:\hwk\disk.vhdx' -Path 'C:\hwk\hwk-build-x'
Hyper-V\Set-VM -VM $vm -ProcessorCount 2 -StaticMemory -AutomaticCheckpointsEnabled $false -Notes 'hwk:{"build":true}'
Hyper-V\Set-VMFirmware -VM $vm -EnableSecureBoot On -SecureBootTemplate MicrosoftWindows
Hyper-V\Get-VMNetworkAdapter -VM $vm | Hyper-V\Remove-VMNetworkAdapter
$dvd0 = Hyper-V\Add-VMDvdDrive -VM $vm -Path 'C:\hwk\server.iso' -Passthru
$dvd1 = Hyper-V\Add-VMDvdDrive -VM $vm -Path 'C:\hwk\build.iso' -Passthru
Hyper-V\Set-VMFirmware -VM $vm -FirstBootDevice $dvd0
Hyper-V\Set-VMComPort -VM $vm -Number 1 -Path '\\.\pipe\hwk-hwk-build-x'
Hyper-V\Start-VM -VM $vm
# --- script 3
$vm = Hyper-V\Get-VM -Name 'hwk-build-x'
$kb = CimCmdlets\Get-CimInstance -Namespace 'root\virtualization\v2' -ClassName Msvm_Keyboard -Filter "SystemName='$($vm.Id)'"
for ($i = 0; $i -lt 30; $i++) {
    CimCmdlets\Invoke-CimMethod -InputObject $kb -MethodName TypeKey -Arguments @{ keyCode = [uint32]0x20 } | Microsoft.PowerShell.Core\Out-Null
    Microsoft.PowerShell.Utility\Start-Sleep -Seconds 1
}
# --- script 4
$vm = Hyper-V\Get-VM -Name 'hwk-build-x' -ErrorAction SilentlyContinue
if ($vm) { [string]$vm.State } else { '' }
# --- script 5
$vm = Hyper-V\Get-VM -Name 'hwk-build-x' -ErrorAction SilentlyContinue
if ($vm) { [string]$vm.State } else { '' }
# --- script 6
$vm = Hyper-V\Get-VM -Name 'hwk-build-x' -ErrorAction SilentlyContinue
if ($vm) { [string]$vm.State } else { '' }
# --- script 7
$vm = Hyper-V\Get-VM -Name 'hwk-build-x' -ErrorAction SilentlyContinue
if ($vm) {
    if ($vm.State -ne 'Off') { Hyper-V\Stop-VM -VM $vm -TurnOff -Force }
    Hyper-V\Remove-VM -VM $vm -Force
}
