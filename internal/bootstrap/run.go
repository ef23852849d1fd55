package bootstrap

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// Paths on nodes where hwk puts its kubeadm configs.
const (
	LinuxConfigDir   = "/etc/hwk"
	WindowsConfigDir = `C:\hwk`
	// initConfig is the control plane's kubeadm init config (see Init).
	initConfig = LinuxConfigDir + "/kubeadm-init.yaml"
	// PatchesDir holds the kubeadm patches of the control plane's init.
	PatchesDir = LinuxConfigDir + "/patches"
	// kubeletDefaults is the environment file the node image's kubelet
	// unit reads besides kubeadm's flags.
	kubeletDefaults = "/etc/default/kubelet"
	// kubeletRouteDropIn is the drop-in of kubeletServiceRoute.
	kubeletRouteDropIn = "/etc/systemd/system/kubelet.service.d/20-hwk-service-route.conf"
	adminKubeconfig    = "/etc/kubernetes/admin.conf"
	caCertPath         = "/etc/kubernetes/pki/ca.crt"
)

// GOGC is the garbage collection target hwk sets for the Go programs of a
// Linux node (the control plane's, the kubelet, Calico and CoreDNS): each
// heap grows to one and a half times what is live, not Go's default twice.
const GOGC = 50 // Why: Go's 100 holds memory for nothing on an idle cluster; 50 costs a little CPU (make bench-up).

// coreDNSPhase is the phase of kubeadm init that installs CoreDNS; Init
// skips it and InstallCoreDNS runs it once Calico runs (see there).
const coreDNSPhase = "addon/coredns"

// kubeletFinalizePhase is the phase of kubeadm init that points the
// control plane's kubelet.conf at the kubelet's rotating client
// certificate, then restarts the kubelet. Init skips it and does its first
// part (kubeletRotatingCert).
const kubeletFinalizePhase = "kubelet-finalize"

// kubeletRotatingCert is the shell of kubelet-finalize without the
// kubelet's restart: it makes kubelet.conf ($conf) name the kubelet's
// client certificate file ($pem) instead of embedding kubeadm's, and
// changes nothing if $pem is not there (see Init for why).
const kubeletRotatingCert = `[ -s "$pem" ] || exit 0
sed -i -e "s|^\( *\)client-certificate-data: .*|\1client-certificate: $pem|" \
	-e "s|^\( *\)client-key-data: .*|\1client-key: $pem|" "$conf"
`

// initScript runs kubeadm init with the arguments it is given, then
// kubeletRotatingCert, in one command on the node.
const initScript = `kubeadm init "$@" || exit
conf=/etc/kubernetes/kubelet.conf pem=/var/lib/kubelet/pki/kubelet-client-current.pem
` + kubeletRotatingCert

// coreDNSPatch is kubeadm's patch of CoreDNS's Deployment: one replica
// (a development cluster has no node to lose; minikube runs one too), its
// readiness looked at every second rather than every ten, so that a ready
// CoreDNS is seen as one at once, and GOGC as on the rest of the node.
var coreDNSPatch = fmt.Sprintf(`# CoreDNS as hwk installs it (kubeadm patch, target corednsdeployment).
spec:
  replicas: 1
  template:
    spec:
      containers:
      - name: coredns
        env:
        - {name: GOGC, value: "%d"}
        readinessProbe:
          periodSeconds: 1
`, GOGC)

// Init runs `kubeadm init` on the control plane with cfg (see InitConfig),
// writing kubeadm's output to log. It skips CoreDNS, which
// InstallCoreDNS adds, and the kubelet's restart (kubeletFinalizePhase).
func Init(ctx context.Context, cp *node.Node, cfg []byte, services netip.Prefix, log io.Writer) error {
	// Why: kubelet-finalize restarts the kubelet as the node comes up: a
	// few hundred milliseconds of kubeadm init, and a kubelet that starts
	// its pods again. initScript does its first part instead
	// (kubeletRotatingCert, after kubeadm v1.35.4
	// cmd/kubeadm/app/cmd/phases/init/kubeletfinalize.go): the certificate
	// kubeadm embeds is valid for a year, while the running kubelet
	// already uses the file (its certificate manager started from
	// kubelet.conf's certificate); a restarted one reads the file too, and
	// neither needs the embedded one, which kubeadm certs renew leaves
	// alone.
	if err := cp.CopyTo(ctx, bytes.NewReader(cfg), initConfig, 0o600); err != nil {
		return err
	}
	if err := cp.CopyTo(ctx, strings.NewReader(coreDNSPatch), PatchesDir+"/corednsdeployment+strategic.yaml", 0o644); err != nil {
		return err
	}
	if err := writeKubeletDefaults(ctx, cp, services); err != nil {
		return err
	}
	return cp.Run(ctx, node.Cmd{
		Args: []string{"sh", "-c", initScript, "kubeadm-init",
			"--config", initConfig, "--skip-phases", coreDNSPhase + "," + kubeletFinalizePhase, "--skip-token-print", "--v=2"},
		Stdout: log, Stderr: log,
	})
}

// InstallCoreDNS runs the CoreDNS phase of kubeadm init that Init skipped,
// with the same config and patches, then uploads that config again. Run it
// once calico-node runs: CoreDNS's pod needs it on its node.
func InstallCoreDNS(ctx context.Context, cp *node.Node, log io.Writer) error {
	// Why: skipping the phase recorded CoreDNS as disabled in the
	// kubeadm-config ConfigMap, which kubeadm upgrade would believe; hence
	// upload-config again.
	// Why it waits for Calico: Calico's install-cni makes the node Ready
	// before calico-node has started, a pod placed then fails to get its
	// network ("stat /var/lib/calico/nodename"), and the kubelet tries
	// again only after ten seconds.
	for _, phase := range [][]string{{"addon", "coredns"}, {"upload-config", "kubeadm"}} {
		args := append([]string{"kubeadm", "init", "phase"}, phase...)
		if err := cp.Run(ctx, node.Cmd{
			Args:   append(args, "--config", initConfig, "--v=2"),
			Stdout: log, Stderr: log,
		}); err != nil {
			return err
		}
	}
	return nil
}

// writeKubeletDefaults gives a Linux node's kubelet GOGC, through the
// environment file its unit reads, and the route of kubeletServiceRoute,
// through a drop-in of its unit. kubeadm init and join then start the
// kubelet, and reload systemd's units first (kubeadm's initsystem,
// ServiceRestart), so the drop-in counts from that start on.
func writeKubeletDefaults(ctx context.Context, n *node.Node, services netip.Prefix) error {
	if err := n.CopyTo(ctx, strings.NewReader(fmt.Sprintf("# Written by hwk: the kubelet's environment.\nGOGC=%d\n", GOGC)), kubeletDefaults, 0o644); err != nil {
		return err
	}
	return n.CopyTo(ctx, strings.NewReader(kubeletServiceRoute(services)), kubeletRouteDropIn, 0o644)
}

// kubeletServiceRoute returns a drop-in of the kubelet's unit that makes
// the Service range unreachable on the node before the kubelet starts, at
// every boot, so that a dial to a Service kube-proxy has not yet
// translated fails at once. Translated traffic never meets the route.
func kubeletServiceRoute(services netip.Prefix) string {
	// Why: when a node starts again (hwk start, an engine restart) the
	// kubelet starts every pod at once; a pod that dials a Service before
	// kube-proxy has written its rules sends the SYN out of the default
	// route untranslated, and its retransmissions keep that conntrack
	// entry, so the client hangs until its dial timeout (30 s for
	// client-go: CoreDNS and calico-kube-controllers were not Ready for
	// 35 s after start). Failing the dial makes the client's next one be
	// translated; kube-proxy's DNAT happens before the routing decision.
	return fmt.Sprintf(`# Written by hwk: the Service range is unreachable until kube-proxy translates it.
[Service]
ExecStartPre=-/usr/sbin/ip route replace unreachable %s
`, services.Masked())
}

// AdminKubeconfig reads kubeadm's admin.conf from the control plane.
func AdminKubeconfig(ctx context.Context, cp *node.Node) ([]byte, error) {
	out, err := cp.Output(ctx, "cat", adminKubeconfig)
	return []byte(out), err
}

// ReadCACertHash reads the cluster CA from the control plane and returns
// its discovery hash (see CACertHash).
func ReadCACertHash(ctx context.Context, cp *node.Node) (string, error) {
	pem, err := cp.Output(ctx, "cat", caCertPath)
	if err != nil {
		return "", err
	}
	return CACertHash([]byte(pem))
}

// Apply applies manifests with kubectl on the control plane, server-side
// (Calico's CRDs are too large for client-side apply's annotation).
func Apply(ctx context.Context, cp *node.Node, manifests []byte, log io.Writer) error {
	return cp.Run(ctx, node.Cmd{
		Args: []string{"kubectl", "--kubeconfig", adminKubeconfig, "apply",
			"--server-side", "--force-conflicts", "--field-manager=hwk", "-f", "-"},
		Stdin: bytes.NewReader(manifests), Stdout: log, Stderr: log,
	})
}

// Join joins worker n with cfg (see JoinConfig), on Linux with kubeadm
// (services is the cluster's Service range, see kubeletServiceRoute) and
// on Windows with the steps of WindowsJoinScript.
func Join(ctx context.Context, n *node.Node, cfg []byte, services netip.Prefix, log io.Writer) error {
	if n.OS() == config.Windows {
		return joinWindows(ctx, n, cfg, log)
	}
	path := LinuxConfigDir + "/kubeadm-join.yaml"
	if err := n.CopyTo(ctx, bytes.NewReader(cfg), path, 0o600); err != nil {
		return err
	}
	if err := writeKubeletDefaults(ctx, n, services); err != nil {
		return err
	}
	return n.Run(ctx, node.Cmd{
		Args:   []string{"kubeadm", "join", "--config", path, "--v=2"},
		Stdout: log, Stderr: log,
	})
}

// joinWindows does Join's work on a Windows node.
func joinWindows(ctx context.Context, n *node.Node, cfg []byte, log io.Writer) error {
	path := WindowsConfigDir + `\kubeadm-join.yaml`
	if err := n.CopyTo(ctx, bytes.NewReader(cfg), path, 0o600); err != nil {
		return err
	}
	return n.RunScript(ctx, WindowsJoinScript(path), node.Cmd{Stdout: log, Stderr: log})
}

// WindowsJoinScript returns the PowerShell that joins a Windows node with
// `c:\k\kubeadm.exe join --config configPath`. The node's image must carry
// kubeadm.exe and kubelet.exe in C:\k, containerd as a service, and a
// kubelet service that kubeadm starts.
func WindowsJoinScript(configPath string) string {
	// Why: that is the layout of sig-windows-tools'
	// hostprocess/PrepareNode.ps1 (at 401ee6fc, lines 113-126: a service
	// named kubelet depending on containerd), joined as Calico's Windows
	// guide has it (tigera/docs version-3.31 windows-calico/operator.mdx).
	// kubeadm logs to stderr, so it runs under 'Continue' (see
	// internal/testing/pscatalog's TestNoNativeUnderStop).
	return strings.ReplaceAll(`$ErrorActionPreference = 'Stop'
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
& 'C:\k\kubeadm.exe' join --config '@CONFIG@' '--v=2' 2>&1 | Microsoft.PowerShell.Core\ForEach-Object { "$_" }
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
`, "@CONFIG@", strings.ReplaceAll(configPath, "'", "''"))
}

// KubeletJournal returns the kubelet's last n log lines on a Linux node,
// for failure messages; on any error it returns why instead.
func KubeletJournal(ctx context.Context, n *node.Node, lines int) string {
	if n.OS() == config.Windows {
		out, err := n.Output(ctx, node.ScriptArgs(node.PowerShell, kubeletLogScript(lines))...)
		if err != nil {
			return "(cannot read the kubelet log: " + err.Error() + ")"
		}
		return out
	}
	out, err := n.Output(ctx, "journalctl", "-u", "kubelet", "--no-pager", "-o", "cat", "-n", fmt.Sprint(lines))
	if err != nil {
		return "(cannot read the kubelet journal: " + err.Error() + ")"
	}
	return out
}

// kubeletLogScript prints the end of the kubelet's log on a Windows node
// (where PrepareNode.ps1's nssm service writes it).
func kubeletLogScript(lines int) string {
	return logTailScript(windowsLogs[0].path, lines)
}
