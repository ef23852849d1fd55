$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'
$seed = 'D:\'
$marker = 'C:\ProgramData\hwk\seed.applied'
$id = '0123456789abcdef'
if ((Microsoft.PowerShell.Management\Test-Path -LiteralPath $marker) -and ((Microsoft.PowerShell.Management\Get-Content -Raw -LiteralPath $marker).Trim() -eq $id)) {
    Microsoft.PowerShell.Utility\Write-Output "hwk-seed: seed $id is applied already"
    exit 0
}

# Network: the one connected adapter gets the node's static address; hwk
# owns the subnet and never relies on DHCP. hwk-seed has waited for Setup
# to finish and for this adapter to be Up (WaitReady) before this runs.
$nics = @(NetAdapter\Get-NetAdapter -Physical | Microsoft.PowerShell.Core\Where-Object Status -eq 'Up')
if ($nics.Count -ne 1) {
    throw "hwk-seed: want one connected network adapter, found $($nics.Count)"
}
$if = $nics[0].ifIndex
NetTCPIP\Set-NetIPInterface -InterfaceIndex $if -AddressFamily IPv4 -Dhcp Disabled
NetTCPIP\Get-NetIPAddress -InterfaceIndex $if -AddressFamily IPv4 -ErrorAction SilentlyContinue | NetTCPIP\Remove-NetIPAddress -Confirm:$false
NetTCPIP\Get-NetRoute -InterfaceIndex $if -DestinationPrefix '0.0.0.0/0' -ErrorAction SilentlyContinue | NetTCPIP\Remove-NetRoute -Confirm:$false
NetTCPIP\New-NetIPAddress -InterfaceIndex $if -IPAddress '172.31.250.11' -PrefixLength 24 -DefaultGateway '172.31.250.1' | Microsoft.PowerShell.Core\Out-Null
DnsClient\Set-DnsClientServerAddress -InterfaceIndex $if -ServerAddresses @('172.31.250.1')

# SSH: the cluster's key for Administrator, readable by Administrators and
# SYSTEM only (sshd ignores the file otherwise), and the host key hwk
# pinned for this node.
$ssh = 'C:\ProgramData\ssh'
Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path $ssh | Microsoft.PowerShell.Core\Out-Null
function Protect([string]$path) {
    # icacls' own complaint, on stderr, must not end the script before
    # the throw below names the file (see internal/testing/pscatalog).
    $ErrorActionPreference = 'Continue'
    # By SID: the group names are localized (Administratoren, Järjestelmä).
    & icacls.exe $path /inheritance:r /grant '*S-1-5-32-544:F' /grant '*S-1-5-18:F' | Microsoft.PowerShell.Core\Out-Null
    if ($LASTEXITCODE -ne 0) { throw "hwk-seed: icacls $path exited with $LASTEXITCODE" }
}
# The seed is a CD, whose files Windows marks read-only; a copy keeps the
# attribute (CopyFile), which would stop the next seed's copy or an edit.
function Copy-FromSeed([string]$name, [string]$to) {
    Microsoft.PowerShell.Management\Copy-Item -Force -LiteralPath (Microsoft.PowerShell.Management\Join-Path $seed $name) -Destination $to
    $copy = Microsoft.PowerShell.Management\Get-Item -LiteralPath $to
    $copy.IsReadOnly = $false
}
Copy-FromSeed 'authorized_keys' "$ssh\administrators_authorized_keys"
Protect "$ssh\administrators_authorized_keys"
Copy-FromSeed 'ssh_host_ed25519_key' "$ssh\ssh_host_ed25519_key"
Protect "$ssh\ssh_host_ed25519_key"
Copy-FromSeed 'ssh_host_ed25519_key.pub' "$ssh\ssh_host_ed25519_key.pub"
Microsoft.PowerShell.Management\Set-Service -Name sshd -StartupType Automatic
Microsoft.PowerShell.Management\Restart-Service -Name sshd

# The answer files Setup has used: sysprep's copy holds the image's
# Administrator password (hidden, not encrypted).
foreach ($answer in "$env:SystemRoot\Panther\unattend.xml", "$env:SystemRoot\Panther\Unattend\unattend.xml", "$env:SystemRoot\System32\Sysprep\unattend.xml", 'C:\hwk\sysprep-unattend.xml') {
    Microsoft.PowerShell.Management\Remove-Item -Force -LiteralPath $answer -ErrorAction SilentlyContinue
}

# The node's disk can be larger than the image's (nodes[].disk): C: takes
# what there is. A failure leaves the node working, on a smaller C:.
try {
    $size = (Storage\Get-Partition -DriveLetter C).Size
    $max = (Storage\Get-PartitionSupportedSize -DriveLetter C).SizeMax
    if ($max -gt ($size + 16777216)) {
        Storage\Resize-Partition -DriveLetter C -Size $max
        Microsoft.PowerShell.Utility\Write-Output "hwk-seed: C: grown from $size to $max bytes"
    }
} catch {
    Microsoft.PowerShell.Utility\Write-Output "hwk-seed: C: stays at its size: $($_.Exception.Message)"
}

Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path (Microsoft.PowerShell.Management\Split-Path -Parent $marker) | Microsoft.PowerShell.Core\Out-Null
Microsoft.PowerShell.Management\Set-Content -LiteralPath $marker -Value $id
# The name last: it takes a restart, after which this finds the marker.
if ($env:COMPUTERNAME -ne 'hwk-win-1') {
    Microsoft.PowerShell.Management\Rename-Computer -NewName 'hwk-win-1' -Force
    Microsoft.PowerShell.Management\Restart-Computer -Force
}
Microsoft.PowerShell.Utility\Write-Output "hwk-seed: applied seed $id"
