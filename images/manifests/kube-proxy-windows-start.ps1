# hwk's start script for kube-proxy on Windows nodes (HostProcess
# container). Runs in Windows PowerShell 5.1 with the container's files
# under $env:CONTAINER_SANDBOX_MOUNT_POINT.
#
# Modelled on, step by step (each step below names its upstream line):
#   [SWT] kubernetes-sigs/sig-windows-tools hostprocess/calico/kube-proxy/start.ps1
#         at 401ee6fc (its text last changed in e35b2e16, PR #342), the start
#         script of the image this DaemonSet runs;
#   [CAL] projectcalico/calico v3.30.0 (572a32dd)
#         node/windows-packaging/CalicoWindows/kubernetes/kube-proxy-service.ps1,
#         the same steps as Calico shipped them (removed before v3.31.0 by
#         9d1147cf, when Calico left kube-proxy to the HostProcess DaemonSet).
# Where hwk differs it says why.
$ErrorActionPreference = 'Stop'
$sandbox = $env:CONTAINER_SANDBOX_MOUNT_POINT
$networkName = 'Calico'

# HNS through Windows' HostNetworkingService module: the one way all of
# hwk reads HNS (the join's wait for Calico's network, `hwk export logs`).
# It comes with the Containers feature hwk's image enables, and upstream
# depends on it too: [SWT] imports the image's hns.psm1 (line 23) but then
# calls Get-HnsNetwork and Get-HnsEndpoint (lines 29, 76, 83, 87), which
# hns.psm1 does not export (microsoft/SDN Kubernetes/windows/hns.psm1 at
# 710cad6, exports at lines 481-502), so those come from Windows' module;
# Calico's node-service.ps1 (v3.31.0, lines 78 and 118) calls them the
# same way. A node without the module has no Calico network either.
Microsoft.PowerShell.Core\Import-Module HostNetworkingService
function Get-Networks { @(HostNetworkingService\Get-HnsNetwork) }
function Get-Endpoints { @(HostNetworkingService\Get-HnsEndpoint) }
function Get-PolicyLists { @(HostNetworkingService\Get-HnsPolicyList | Microsoft.PowerShell.Core\Where-Object Id) }
function Remove-PolicyLists($lists) { $lists | HostNetworkingService\Remove-HnsPolicyList }

# Wait for the HNS network Calico's node makes ([SWT] lines 28-32, [CAL]
# lines 31-35: the same loop, no timeout; the pod restarts if this script
# fails).
Microsoft.PowerShell.Utility\Write-Output "waiting for HNS network $networkName"
while (-not (Get-Networks | Microsoft.PowerShell.Core\Where-Object Name -EQ $networkName)) {
    Microsoft.PowerShell.Utility\Start-Sleep -Seconds 1
}
$network = Get-Networks | Microsoft.PowerShell.Core\Where-Object Name -EQ $networkName | Microsoft.PowerShell.Utility\Select-Object -First 1

# The kubeadm ConfigMap's kubeconfig points at /var/run/secrets/...; in a
# HostProcess container those files are under the sandbox mount. Write a
# fixed copy beside it ([SWT] line 56, which PR #342 moved to a copy so the
# kubelet's rewrites of the ConfigMap's own files do not undo it; hwk
# rewrites only /var/run/secrets, the two paths kubeadm's kubeconfig holds).
$kubeProxy = Microsoft.PowerShell.Management\Join-Path $sandbox 'kube-proxy/kube-proxy.exe'
if (-not (Microsoft.PowerShell.Management\Test-Path -LiteralPath $kubeProxy)) {
    throw "$kubeProxy is missing: the DaemonSet's image is not the kube-proxy HostProcess image"
}
$configDir = Microsoft.PowerShell.Management\Join-Path $sandbox 'var/lib/kube-proxy'
$kubeconfig = Microsoft.PowerShell.Management\Join-Path $configDir 'kubeconfig-win.conf'
(Microsoft.PowerShell.Management\Get-Content -Raw (Microsoft.PowerShell.Management\Join-Path $configDir 'kubeconfig.conf')) -replace '/var/run/secrets', "$sandbox/var/run/secrets" |
    Microsoft.PowerShell.Management\Set-Content -Path $kubeconfig -Encoding ASCII

# Flags ([SWT] lines 60-71, [CAL] lines 49-60): kernelspace mode with DSR
# (Windows Server 2022 supports it; [SWT] line 47 assumes it). Upstream's
# version check for kube-proxy older than 1.14 ([SWT] lines 35-43) has no
# use here. Upstream also passes --feature-gates=WinDSR=true,WinOverlay=true
# ([SWT] lines 70, 89-96): both gates are GA and locked on since Kubernetes
# 1.34 (pkg/features/kube_features.go), so on 1.35 they only draw a warning,
# and kubernetes PR #142125 removes them, after which naming them is fatal.
# hwk passes neither.
$arguments = @(
    "--hostname-override=$env:NODENAME",
    '--proxy-mode=kernelspace',
    "--kubeconfig=$kubeconfig",
    '--enable-dsr=true',
    '--v=2'
)

# On VXLAN (an Overlay network) kube-proxy needs the host endpoint's
# address as its source VIP ([SWT] lines 76-88, [CAL] lines 65-79: wait for
# Calico_ep, take its address). Calico's node makes Calico_ep on the
# node's block (calico v3.31.0 cni-plugin/pkg/dataplane/windows/
# dataplane_windows.go, createAndAttachVxlanHostEP); HNS names the field
# IPAddress, and PowerShell's property names are case-blind.
if ($network.Type -EQ 'Overlay') {
    Microsoft.PowerShell.Utility\Write-Output 'waiting for HNS endpoint Calico_ep'
    while (-not (Get-Endpoints | Microsoft.PowerShell.Core\Where-Object Name -EQ 'Calico_ep')) {
        Microsoft.PowerShell.Utility\Start-Sleep -Seconds 1
    }
    $sourceVip = (Get-Endpoints | Microsoft.PowerShell.Core\Where-Object Name -EQ 'Calico_ep' | Microsoft.PowerShell.Utility\Select-Object -First 1).IpAddress
    $arguments += "--source-vip=$sourceVip"
}

# Remove every HNS policy list before kube-proxy starts ([SWT] lines
# 98-103, [CAL] lines 87-92: "kube-proxy doesn't handle resync if there
# are pre-existing policies"). kube-proxy also clears HNS load balancers
# itself as it starts (pkg/proxy/winkernel); the lists go here anyway, as
# upstream does, so no start meets what an earlier kube-proxy left.
$policyLists = Get-PolicyLists
if ($policyLists.Count -gt 0) {
    Microsoft.PowerShell.Utility\Write-Output "removing $($policyLists.Count) stale HNS policy lists"
    Remove-PolicyLists $policyLists
}

# kube-proxy finds the HNS network by this exact name ([SWT] lines
# 106-108: Calico's own KUBE_NETWORK is the pattern Calico.*, which
# kube-proxy would take for a name).
$env:KUBE_NETWORK = $networkName

# Run it under 'Continue', as upstream does ([SWT] line 109, under the
# default): Windows PowerShell 5.1 makes each line a program writes to
# stderr an error record whenever it captures that stderr (as it does
# without a console, which a HostProcess container may not give it), and
# under 'Stop' the first line kube-proxy logs would end this script and
# kube-proxy with it (PowerShell/PowerShell #3996, #4002). 2>&1 and the
# string conversion keep its log lines as they are either way.
Microsoft.PowerShell.Utility\Write-Output "starting $kubeProxy $($arguments -join ' ')"
$ErrorActionPreference = 'Continue'
& $kubeProxy @arguments 2>&1 | Microsoft.PowerShell.Core\ForEach-Object { "$_" }
exit $LASTEXITCODE
