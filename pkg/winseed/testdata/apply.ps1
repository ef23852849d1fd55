$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'
$seed = 'D:\'
$marker = 'C:\ProgramData\hwk\seed.applied'
$id = '0123456789abcdef'
if ((Test-Path -LiteralPath $marker) -and ((Get-Content -Raw -LiteralPath $marker).Trim() -eq $id)) {
    Write-Output "hwk-seed: seed $id is applied already"
    exit 0
}

# Network: the one connected adapter gets the node's static address; hwk
# owns the subnet and never relies on DHCP.
$nics = @(Get-NetAdapter -Physical | Where-Object Status -eq 'Up')
if ($nics.Count -ne 1) {
    throw "hwk-seed: want one connected network adapter, found $($nics.Count)"
}
$if = $nics[0].ifIndex
Set-NetIPInterface -InterfaceIndex $if -AddressFamily IPv4 -Dhcp Disabled
Get-NetIPAddress -InterfaceIndex $if -AddressFamily IPv4 -ErrorAction SilentlyContinue | Remove-NetIPAddress -Confirm:$false
Get-NetRoute -InterfaceIndex $if -DestinationPrefix '0.0.0.0/0' -ErrorAction SilentlyContinue | Remove-NetRoute -Confirm:$false
New-NetIPAddress -InterfaceIndex $if -IPAddress '172.31.250.11' -PrefixLength 24 -DefaultGateway '172.31.250.1' | Out-Null
Set-DnsClientServerAddress -InterfaceIndex $if -ServerAddresses @('172.31.250.1')

# SSH: the cluster's key for Administrator, readable by Administrators and
# SYSTEM only (sshd ignores the file otherwise), and the host key hwk
# pinned for this node.
$ssh = 'C:\ProgramData\ssh'
New-Item -ItemType Directory -Force -Path $ssh | Out-Null
function Protect([string]$path) {
    & icacls.exe $path /inheritance:r /grant 'Administrators:F' /grant 'SYSTEM:F' | Out-Null
    if ($LASTEXITCODE -ne 0) { throw "hwk-seed: icacls $path exited with $LASTEXITCODE" }
}
Copy-Item -Force -LiteralPath (Join-Path $seed 'authorized_keys') -Destination "$ssh\administrators_authorized_keys"
Protect "$ssh\administrators_authorized_keys"
Copy-Item -Force -LiteralPath (Join-Path $seed 'ssh_host_ed25519_key') -Destination "$ssh\ssh_host_ed25519_key"
Protect "$ssh\ssh_host_ed25519_key"
Copy-Item -Force -LiteralPath (Join-Path $seed 'ssh_host_ed25519_key.pub') -Destination "$ssh\ssh_host_ed25519_key.pub"
Set-Service -Name sshd -StartupType Automatic
Restart-Service -Name sshd

New-Item -ItemType Directory -Force -Path (Split-Path -Parent $marker) | Out-Null
Set-Content -LiteralPath $marker -Value $id
# The name last: it takes a restart, after which this finds the marker.
if ($env:COMPUTERNAME -ne 'hwk-win-1') {
    Rename-Computer -NewName 'hwk-win-1' -Force
    Restart-Computer -Force
}
Write-Output "hwk-seed: applied seed $id"
