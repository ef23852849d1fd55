# hwk's start script for kube-proxy on Windows nodes (HostProcess
# container). Runs in Windows PowerShell 5.1 with the container's files
# under $env:CONTAINER_SANDBOX_MOUNT_POINT.
$ErrorActionPreference = 'Stop'
$sandbox = $env:CONTAINER_SANDBOX_MOUNT_POINT
$networkName = 'Calico'

# Calico's node creates the HNS network, and on VXLAN (an Overlay network)
# the host endpoint whose address kube-proxy needs as its source VIP.
Import-Module HostNetworkingService
Write-Output "waiting for HNS network $networkName"
while (-not (Get-HnsNetwork | Where-Object Name -EQ $networkName)) {
    Start-Sleep -Seconds 1
}
$network = Get-HnsNetwork | Where-Object Name -EQ $networkName

$kubeProxy = Join-Path $sandbox 'kube-proxy/kube-proxy.exe'
# The kubeadm ConfigMap's kubeconfig points at /var/run/secrets/...; in a
# HostProcess container those files are under the sandbox mount. Write a
# fixed copy beside it (the ConfigMap's own files are rewritten by the
# kubelet, so they are never edited in place).
$configDir = Join-Path $sandbox 'var/lib/kube-proxy'
$kubeconfig = Join-Path $configDir 'kubeconfig-win.conf'
(Get-Content -Raw (Join-Path $configDir 'kubeconfig.conf')) -replace '/var/run/secrets', "$sandbox/var/run/secrets" |
    Set-Content -Path $kubeconfig -Encoding ASCII

$arguments = @(
    "--hostname-override=$env:NODENAME",
    '--proxy-mode=kernelspace',
    "--kubeconfig=$kubeconfig",
    '--enable-dsr=true',
    '--v=2'
)
if ($network.Type -EQ 'Overlay') {
    Write-Output 'waiting for HNS endpoint Calico_ep'
    while (-not (Get-HnsEndpoint | Where-Object Name -EQ 'Calico_ep')) {
        Start-Sleep -Seconds 1
    }
    $sourceVip = (Get-HnsEndpoint | Where-Object Name -EQ 'Calico_ep').IpAddress
    $arguments += "--source-vip=$sourceVip"
}

# kube-proxy finds the HNS network by this name.
$env:KUBE_NETWORK = $networkName
Write-Output "starting $kubeProxy $($arguments -join ' ')"
& $kubeProxy @arguments
exit $LASTEXITCODE
