package logs

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/hwk-dev/hwk/pkg/node"
)

// WindowsItems are the logs and state a Windows node gives, each a file
// and the PowerShell that prints it.
var WindowsItems = []Item{
	// Where hwk's Windows node image has the kubelet and containerd write
	// (see internal/bootstrap).
	{File: "kubelet.log", Script: `Microsoft.PowerShell.Management\Get-Content -Raw -LiteralPath 'C:\var\log\kubelet\kubelet.err.log'`},
	{File: "containerd.log", Script: `Microsoft.PowerShell.Management\Get-Content -Raw -LiteralPath 'C:\var\log\containerd\containerd.log'`},
	// Calico's and kube-proxy's containers are HostProcess containers
	// that log to their pod logs.
	{File: "calico-node.log", Script: newestLog(`C:\var\log\pods\kube-system_calico-node-windows-*\node\*.log`)},
	{File: "calico-felix.log", Script: newestLog(`C:\var\log\pods\kube-system_calico-node-windows-*\felix\*.log`)},
	{File: "kube-proxy.log", Script: newestLog(`C:\var\log\pods\kube-system_kube-proxy-windows-*\*\*.log`)},
	{File: "hns-networks.json", Script: `HostNetworkingService\Get-HnsNetwork | Microsoft.PowerShell.Utility\ConvertTo-Json -Depth 20`},
	{File: "hns-endpoints.json", Script: `HostNetworkingService\Get-HnsEndpoint | Microsoft.PowerShell.Utility\ConvertTo-Json -Depth 20`},
	{File: "hns-policylists.json", Script: `HostNetworkingService\Get-HnsPolicyList | Microsoft.PowerShell.Utility\ConvertTo-Json -Depth 20`},
	{File: "cni-config.txt", Script: `Microsoft.PowerShell.Management\Get-ChildItem -LiteralPath 'C:\etc\cni\net.d' -File | Microsoft.PowerShell.Core\ForEach-Object { "--- $($_.FullName)"; Microsoft.PowerShell.Management\Get-Content -Raw -LiteralPath $_.FullName }`},
	// The event channels Microsoft's own collection script copies
	// (microsoft/SDN Kubernetes/windows/debug/collectlogs.ps1 at 242fb0c,
	// lines 294-297), and the Host Network Service's.
	{File: "events-hyperv-compute.txt", Script: events("Microsoft-Windows-Hyper-V-Compute-Admin", "Microsoft-Windows-Hyper-V-Compute-Operational")},
	{File: "events-hyperv-worker.txt", Script: events("Microsoft-Windows-Hyper-V-Worker-Admin", "Microsoft-Windows-Hyper-V-Worker-Operational")},
	{File: "events-hns.txt", Script: events("Microsoft-Windows-Host-Network-Service-Admin", "Microsoft-Windows-Host-Network-Service-Operational")},
	{File: "ipconfig-all.txt", Script: `ipconfig.exe /all`},
	{File: "route-print.txt", Script: `route.exe print`},
}

func newestLog(pattern string) string {
	return fmt.Sprintf(`Microsoft.PowerShell.Management\Get-ChildItem -Path '%s' -File | Microsoft.PowerShell.Utility\Sort-Object -Property LastWriteTime | Microsoft.PowerShell.Utility\Select-Object -Last 1 | Microsoft.PowerShell.Core\ForEach-Object { "--- $($_.FullName)"; Microsoft.PowerShell.Management\Get-Content -Raw -LiteralPath $_.FullName }`, pattern)
}

func events(logs ...string) string {
	return fmt.Sprintf(`Microsoft.PowerShell.Diagnostics\Get-WinEvent -LogName '%s' -MaxEvents 500 | Microsoft.PowerShell.Utility\Format-List -Property 'TimeCreated', 'LogName', 'Id', 'LevelDisplayName', 'Message'`, strings.Join(logs, "', '"))
}

// marker starts each item in the script's output.
const marker = "@@hwk-file "

// WindowsScript prints every item, each after a marker line naming its
// file. Errors are part of an item's text (Continue, and 2>&1), so one
// missing log or channel never stops the rest.
func WindowsScript() string {
	var b strings.Builder
	b.WriteString(`$ErrorActionPreference = 'Continue'
$ProgressPreference = 'SilentlyContinue'
[Console]::OutputEncoding = [Text.UTF8Encoding]::new($false)
function Write-Item([string]$File, [scriptblock]$What) {
    "` + marker + `$File"
    try {
        & $What 2>&1 | Microsoft.PowerShell.Utility\Out-String -Width 4096
    } catch {
        "hwk: $_"
    }
}
`)
	for _, it := range WindowsItems {
		fmt.Fprintf(&b, "Write-Item '%s' {\n    %s\n}\n", it.File, it.Script)
	}
	return b.String()
}

// splitItems parts the script's output into files by marker.
func splitItems(out string) map[string]string {
	files := map[string]string{}
	var name string
	var body strings.Builder
	flush := func() {
		if name != "" {
			files[name] = body.String()
		}
		body.Reset()
	}
	for _, line := range strings.SplitAfter(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), marker); ok {
			flush()
			name = rest
			continue
		}
		body.WriteString(line)
	}
	flush()
	return files
}

// CollectWindows writes a Windows node's items into a under dir, in one
// PowerShell session. An item the script did not reach is recorded as
// missing.
func CollectWindows(ctx context.Context, n *node.Node, a *Archive, dir string) (*Result, error) {
	res := &Result{}
	var out strings.Builder
	err := n.RunScript(ctx, WindowsScript(), node.Cmd{Stdout: &out})
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if err != nil {
		res.fail("collection script: %v", err)
	}
	got := splitItems(out.String())
	for _, it := range WindowsItems {
		text, ok := got[it.File]
		if !ok {
			res.fail("%s: the collection script did not get to it", it.File)
			continue
		}
		if strings.Contains(text, "hwk: ") || strings.Contains(text, "CategoryInfo") {
			res.fail("%s: see the file for the error", it.File)
		}
		if err := a.Add(path.Join(dir, it.File), []byte(text)); err != nil {
			return res, err
		}
		res.Files = append(res.Files, it.File)
	}
	return res, nil
}

// Scripts returns every PowerShell script this package makes, for the check
// of every script hwk sends to Windows (internal/testing/pscatalog).
func Scripts() map[string]string {
	return map[string]string{"WindowsScript+WindowsItems+newestLog+events": WindowsScript()}
}
