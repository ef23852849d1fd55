# hwk's start script for kube-proxy on Windows nodes (HostProcess
# container). Runs in Windows PowerShell 5.1 with the container's files
# under $env:CONTAINER_SANDBOX_MOUNT_POINT.
$ErrorActionPreference = 'Stop'
$sandbox = $env:CONTAINER_SANDBOX_MOUNT_POINT
$networkName = 'Calico'

# Calico's node creates the HNS network, and on VXLAN (an Overlay network)
# the host endpoint whose address kube-proxy needs as its source VIP.
Microsoft.PowerShell.Core\Import-Module HostNetworkingService
Microsoft.PowerShell.Utility\Write-Output "waiting for HNS network $networkName"
while (-not (HostNetworkingService\Get-HnsNetwork | Microsoft.PowerShell.Core\Where-Object Name -EQ $networkName)) {
    Microsoft.PowerShell.Utility\Start-Sleep -Seconds 1
}
$network = HostNetworkingService\Get-HnsNetwork | Microsoft.PowerShell.Core\Where-Object Name -EQ $networkName

$kubeProxy = Microsoft.PowerShell.Management\Join-Path $sandbox 'kube-proxy/kube-proxy.exe'
# The kubeadm ConfigMap's kubeconfig points at /var/run/secrets/...; in a
# HostProcess container those files are under the sandbox mount. Write a
# fixed copy beside it (the ConfigMap's own files are rewritten by the
# kubelet, so they are never edited in place).
$configDir = Microsoft.PowerShell.Management\Join-Path $sandbox 'var/lib/kube-proxy'
$kubeconfig = Microsoft.PowerShell.Management\Join-Path $configDir 'kubeconfig-win.conf'
(Microsoft.PowerShell.Management\Get-Content -Raw (Microsoft.PowerShell.Management\Join-Path $configDir 'kubeconfig.conf')) -replace '/var/run/secrets', "$sandbox/var/run/secrets" |
    Microsoft.PowerShell.Management\Set-Content -Path $kubeconfig -Encoding ASCII

$arguments = @(
    "--hostname-override=$env:NODENAME",
    '--proxy-mode=kernelspace',
    "--kubeconfig=$kubeconfig",
    '--enable-dsr=true',
    '--v=2'
)
if ($network.Type -EQ 'Overlay') {
    Microsoft.PowerShell.Utility\Write-Output 'waiting for HNS endpoint Calico_ep'
    while (-not (HostNetworkingService\Get-HnsEndpoint | Microsoft.PowerShell.Core\Where-Object Name -EQ 'Calico_ep')) {
        Microsoft.PowerShell.Utility\Start-Sleep -Seconds 1
    }
    $sourceVip = (HostNetworkingService\Get-HnsEndpoint | Microsoft.PowerShell.Core\Where-Object Name -EQ 'Calico_ep').IpAddress
    $arguments += "--source-vip=$sourceVip"
}

# kube-proxy finds the HNS network by this name.
$env:KUBE_NETWORK = $networkName
Microsoft.PowerShell.Utility\Write-Output "starting $kubeProxy $($arguments -join ' ')"
& $kubeProxy @arguments
exit $LASTEXITCODE
