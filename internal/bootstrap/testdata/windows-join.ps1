$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'

# kubeadm checks these; a node image without them cannot join.
foreach ($service in 'containerd', 'kubelet') {
    if (-not (Microsoft.PowerShell.Management\Get-Service -Name $service -ErrorAction SilentlyContinue)) {
        throw "service $service is not installed on $env:COMPUTERNAME; rebuild the Windows node image"
    }
}
if ((Microsoft.PowerShell.Management\Get-Service -Name containerd).Status -ne 'Running') {
    Microsoft.PowerShell.Management\Start-Service -Name containerd
}

# Under 'Stop', the first line kubeadm logs to stderr would end this script
# whenever Windows PowerShell captures it; 2>&1 and the string conversion
# keep kubeadm's lines as they are, and its exit status decides (so it
# must be there: under 'Continue' a missing program is only a message).
if (-not (Microsoft.PowerShell.Management\Test-Path -LiteralPath 'C:\k\kubeadm.exe')) {
    throw "C:\k\kubeadm.exe is missing on $env:COMPUTERNAME; rebuild the Windows node image"
}
$ErrorActionPreference = 'Continue'
& 'C:\k\kubeadm.exe' join --config 'C:\hwk\kubeadm-join.yaml' '--v=2' 2>&1 | Microsoft.PowerShell.Core\ForEach-Object { "$_" }
$status = $LASTEXITCODE
$ErrorActionPreference = 'Stop'
if ($status -ne 0) {
    throw "kubeadm join exited with status $status"
}

# kubeadm join has written the kubelet's config and started the service;
# make sure it stays up.
$kubelet = Microsoft.PowerShell.Management\Get-Service -Name kubelet
if ($kubelet.Status -ne 'Running') {
    Microsoft.PowerShell.Management\Start-Service -Name kubelet
}
Microsoft.PowerShell.Management\Set-Service -Name kubelet -StartupType Automatic
Microsoft.PowerShell.Utility\Write-Output "joined: kubelet is $((Microsoft.PowerShell.Management\Get-Service -Name kubelet).Status)"
