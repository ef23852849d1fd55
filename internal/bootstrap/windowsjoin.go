package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// WindowsJoin is the join of a Windows node: Run waits for its SSH, checks
// it runs the Windows build its image was made for, runs kubeadm join,
// waits for Calico's vSwitch and restarts the kubelet once. It does not
// wait for the node's readiness or its pods' (up's WaitReady does).
type WindowsJoin struct {
	Node *node.Node
	// Version is the Windows Server release of the node ("2022").
	Version string
	// Config is the node's JoinConfiguration (JoinConfig).
	Config []byte
	// Log gets kubeadm's output.
	Log io.Writer
	// SSH bounds the wait for the node to answer; Network the wait for
	// Calico's vSwitch. Poll is the time between tries.
	SSH, Network, Poll time.Duration
	// ViaGateway are addresses on the node network that the node must
	// reach through Gateway, the host, rather than on its own link: a
	// control plane in WSL2, which is on WSL's switch and routed by the
	// host.
	ViaGateway []netip.Addr
	Gateway    netip.Addr
}

// WindowsJoinError is a failed step of a Windows join.
type WindowsJoinError struct {
	Node string
	Step string
	Err  error
}

func (e *WindowsJoinError) Error() string {
	return fmt.Sprintf("%s on %s: %v", e.Step, e.Node, e.Err)
}

func (e *WindowsJoinError) Unwrap() error { return e.Err }

// The steps, as WindowsJoinError names them.
const (
	StepSSH     = "wait for SSH"
	StepBuild   = "check the Windows build"
	StepRoute   = "route to the control plane"
	StepJoin    = "kubeadm join"
	StepNetwork = "wait for Calico's network"
	StepKubelet = "restart the kubelet"
)

// windowsBuildScript prints the running Windows' build number.
const windowsBuildScript = `[Environment]::OSVersion.Version.Build`

// calicoNetworkScript prints "yes" once Calico has made its HNS network
// "Calico", "no" before, and "no-hns" on a node without Windows' HNS
// cmdlets (the HostNetworkingService module of the Containers feature).
const calicoNetworkScript = `$ErrorActionPreference = 'Stop'
if (-not (Microsoft.PowerShell.Core\Get-Command -Module HostNetworkingService -Name Get-HnsNetwork -ErrorAction SilentlyContinue)) {
    'no-hns'
} elseif (HostNetworkingService\Get-HnsNetwork | Microsoft.PowerShell.Core\Where-Object { $_.Name -eq 'Calico' }) {
    'yes'
} else {
    'no'
}
`

// ContainerdRunningScript exits 1 unless containerd's service runs on a
// Windows node: the first thing kubeadm needs.
const ContainerdRunningScript = `if ((Microsoft.PowerShell.Management\Get-Service -Name containerd).Status -ne 'Running') { exit 1 }`

// WindowsBootScript is up's check that a Windows node's first boot is
// over: it writes the computer's active NetBIOS name (upper case; a rename
// changes it only at the next restart), then exits as
// ContainerdRunningScript does.
const WindowsBootScript = `Microsoft.PowerShell.Utility\Write-Output ([System.Environment]::MachineName)
` + ContainerdRunningScript

// restartKubeletScript restarts the kubelet, waits up to 30 seconds for
// it to run, and prints its state on its last line (Restart-Service's
// warnings may come before it).
const restartKubeletScript = `$ErrorActionPreference = 'Stop'
Microsoft.PowerShell.Management\Restart-Service -Name kubelet -Force -WarningAction SilentlyContinue
$kubelet = Microsoft.PowerShell.Management\Get-Service -Name kubelet
$kubelet.WaitForStatus('Running', [TimeSpan]::FromSeconds(30))
$kubelet.Status
`

// RouteScript routes dest on the node through gw, on the interface that
// reaches gw: a host route, which wins over the node network's own. It
// replaces one there is, and New-NetRoute without -PolicyStore writes it
// to the active and the persistent store, so it outlives a restart.
func RouteScript(dest, gw netip.Addr) string {
	return fmt.Sprintf(`$ErrorActionPreference = 'Stop'
$dest = '%s/32'
$gw = '%s'
$if = (NetTCPIP\Find-NetRoute -RemoteIPAddress $gw | Microsoft.PowerShell.Utility\Select-Object -First 1).InterfaceIndex
NetTCPIP\Get-NetRoute -DestinationPrefix $dest -ErrorAction SilentlyContinue | NetTCPIP\Remove-NetRoute -Confirm:$false
NetTCPIP\New-NetRoute -DestinationPrefix $dest -InterfaceIndex $if -NextHop $gw | Microsoft.PowerShell.Core\Out-Null
`, dest, gw)
}

// Scripts returns every PowerShell script this package makes, by the
// declaration that makes it: for the check of every script hwk sends to
// Windows (internal/testing/pscatalog).
func Scripts() map[string]string {
	return map[string]string{
		"windowsBuildScript":      windowsBuildScript,
		"calicoNetworkScript":     calicoNetworkScript,
		"restartKubeletScript":    restartKubeletScript,
		"ContainerdRunningScript": ContainerdRunningScript,
		"WindowsBootScript":       WindowsBootScript,
		"WindowsJoinScript":       WindowsJoinScript(WindowsConfigDir + `\kubeadm-join.yaml`),
		"logTailScript":           logTailScript(windowsLogs[0].path, 10),
		"RouteScript":             RouteScript(netip.MustParseAddr("172.31.250.10"), netip.MustParseAddr("172.31.250.1")),
	}
}

// Run joins the node.
func (j *WindowsJoin) Run(ctx context.Context) error {
	fail := func(step string, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &WindowsJoinError{Node: j.Node.Name(), Step: step, Err: err}
	}
	// Why: the first boot of a clone renames it and restarts it once, so
	// SSH may not answer yet.
	out, err := j.retry(ctx, j.SSH, windowsBuildScript, func(err error) bool {
		// A command that ran and failed means SSH works: stop there.
		var ee *node.ExitError
		return !errors.As(err, &ee)
	})
	var ee *node.ExitError
	switch {
	case errors.As(err, &ee):
		return fail(StepBuild, fmt.Errorf("read the build: %w", err))
	case err != nil:
		return fail(StepSSH, fmt.Errorf("no answer within %s: %w\n  fix: the node may still be in its first boot (it restarts once to take its name); see its console, then `hwk down` and up again", j.SSH, err))
	}
	if err := CheckWindowsBuild(j.Version, strings.TrimSpace(out)); err != nil {
		return fail(StepBuild, err)
	}
	if err := j.route(ctx); err != nil {
		return fail(StepRoute, err)
	}
	if err := joinWindows(ctx, j.Node, j.Config, j.Log); err != nil {
		return fail(StepJoin, err)
	}
	// Why: the HNS network "Calico" is what Calico's node makes last, once
	// the node has an address, the vSwitch (HNS network "External") and
	// its management address have settled and calico-node has reached the
	// API server (calico v3.31.0
	// node/windows-packaging/CalicoWindows/node/node-service.ps1, lines
	// 73-216: it makes External, waits for its ManagementIP, then runs
	// calico-node -startup, which makes Calico and Calico_ep), so it comes
	// after the vSwitch that cuts the kubelet off. Upstream waits the same
	// way without a timeout (sig-windows-tools
	// hostprocess/calico/kube-proxy/start.ps1 at 401ee6fc, lines 28-32);
	// hwk bounds it with j.Network. Calico's node and kube-proxy's start
	// script read HNS through the same HostNetworkingService module, which
	// comes with the Containers feature that hwk's image enables.
	deadline := time.Now().Add(j.Network)
	for {
		out, err := j.Node.Output(ctx, node.ScriptArgs(node.PowerShell, calicoNetworkScript)...)
		if err == nil && lastLine(out) == "yes" {
			break
		}
		if err == nil && lastLine(out) == "no-hns" {
			return fail(StepNetwork, errors.New("the node has no HostNetworkingService PowerShell module (Windows' HNS cmdlets, which come with the Containers feature), so neither hwk nor kube-proxy can see Calico's network\n  fix: rebuild the Windows node image (`hwk node-image build windows`); its provisioning enables the Containers feature"))
		}
		if time.Now().After(deadline) {
			why := "Calico has not made its network (HNS network \"Calico\") on the node"
			if err != nil {
				why = err.Error()
			}
			return fail(StepNetwork, fmt.Errorf("after %s: %s\n  fix: check the calico-node-windows pod on the node (`kubectl -n kube-system get pods -o wide`)", j.Network, why))
		}
		if err := sleep(ctx, j.Poll); err != nil {
			return err
		}
	}
	// Calico's vSwitch moved the node's address to a new adapter: route
	// again, on the interface that now reaches the gateway.
	if err := j.route(ctx); err != nil {
		return fail(StepRoute, err)
	}
	// Why: Calico's Windows troubleshooting guide says to restart the
	// kubelet once Calico is installed, since the vSwitch's creation cuts
	// it off from the API server (tigera/docs version-3.31
	// windows-calico/troubleshoot.mdx, "Kubelet persistently fails to
	// contact the API server"); Calico's own installer waits for Running
	// the same way (calico v3.31.0
	// node/windows-packaging/host-process-install.ps1, lines 62-77,
	// WaitForStatus).
	status, err := j.Node.Output(ctx, node.ScriptArgs(node.PowerShell, restartKubeletScript)...)
	if err != nil {
		return fail(StepKubelet, err)
	}
	if s := lastLine(status); s != "Running" {
		return fail(StepKubelet, fmt.Errorf("the kubelet is %s after its restart", s))
	}
	return nil
}

// route routes each of ViaGateway through Gateway.
func (j *WindowsJoin) route(ctx context.Context) error {
	for _, dest := range j.ViaGateway {
		if err := j.Node.Run(ctx, node.Cmd{Args: node.ScriptArgs(node.PowerShell, RouteScript(dest, j.Gateway))}); err != nil {
			return fmt.Errorf("route %s through the host (%s): %w", dest, j.Gateway, err)
		}
	}
	return nil
}

// lastLine returns the last line of a script's output with text on it.
func lastLine(out string) string {
	return strings.TrimSpace(hostexec.LastLines(strings.TrimSpace(out), 1))
}

// retry runs script until it succeeds, again is false for its error, or
// the timeout passes; it returns the script's output.
func (j *WindowsJoin) retry(ctx context.Context, timeout time.Duration, script string, again func(error) bool) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		out, err := j.Node.Output(ctx, node.ScriptArgs(node.PowerShell, script)...)
		if err == nil || !again(err) || time.Now().After(deadline) {
			return out, err
		}
		if err := sleep(ctx, j.Poll); err != nil {
			return "", err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// CheckWindowsBuild checks that build (the node's, as Windows reports
// it) is the one Windows Server version's images run on: process
// isolation needs the two to match.
func CheckWindowsBuild(version, build string) error {
	want, ok := config.WindowsBuilds[version]
	if !ok {
		return fmt.Errorf("version %q: hwk supports Windows Server 2022 and 2025", version)
	}
	wantBuild := want[strings.LastIndex(want, ".")+1:]
	if _, err := strconv.Atoi(build); err != nil {
		return fmt.Errorf("the node reports Windows build %q, not a number", build)
	}
	if build != wantBuild {
		return fmt.Errorf("the node runs Windows build %s, but the cluster asked for Windows Server %s (build %s), whose container images it would not run\n  fix: rebuild the node image from a Windows Server %s ISO (`hwk node-image build windows --version %s`)",
			build, version, wantBuild, version, version)
	}
	return nil
}

// windowsLogs are the logs WindowsLogs reads, by title and path: the
// newest file the path's pattern matches.
var windowsLogs = []struct{ title, path string }{
	// Where hwk's Windows node image has the kubelet and containerd write.
	{"kubelet", `C:\var\log\kubelet\kubelet.err.log`},
	{"containerd", `C:\var\log\containerd\containerd.log`},
	// Why: Calico's node container runs in a HostProcess pod and logs to
	// its stdout (calico v3.31.0 node-service.ps1 writes no file of its own
	// there), so its pod log under the kubelet's
	// C:\var\log\pods\NAMESPACE_POD_UID\CONTAINER.
	{"calico-node-windows, container node", `C:\var\log\pods\kube-system_calico-node-windows-*\node\*.log`},
}

// WindowsLogs returns the end of the kubelet's, containerd's and Calico's
// logs on a Windows node, for failure messages; for a log it cannot read,
// it returns why.
func WindowsLogs(ctx context.Context, n *node.Node, lines int) string {
	var b strings.Builder
	for _, l := range windowsLogs {
		fmt.Fprintf(&b, "--- %s (%s)\n", l.title, l.path)
		out, err := n.Output(ctx, node.ScriptArgs(node.PowerShell, logTailScript(l.path, lines))...)
		if err != nil {
			fmt.Fprintf(&b, "(cannot read it: %v)\n", err)
			continue
		}
		b.WriteString(strings.TrimRight(out, "\r\n") + "\n")
	}
	return b.String()
}

// logTailScript prints the last lines of the newest file path (which may
// hold wildcards) names.
func logTailScript(path string, lines int) string {
	q := strings.ReplaceAll(path, "'", "''")
	return fmt.Sprintf(`$ErrorActionPreference = 'Stop'
$file = Microsoft.PowerShell.Management\Get-ChildItem -Path '%s' -File | Microsoft.PowerShell.Utility\Sort-Object -Property LastWriteTime | Microsoft.PowerShell.Utility\Select-Object -Last 1
if (-not $file) { throw 'no file matches %s' }
Microsoft.PowerShell.Management\Get-Content -Tail %d -LiteralPath $file.FullName
`, q, q, lines)
}
