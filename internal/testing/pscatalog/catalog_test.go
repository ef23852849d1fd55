package pscatalog

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/pscheck"
)

func all(t *testing.T) []Script {
	t.Helper()
	scripts, err := All()
	if err != nil {
		t.Fatal(err)
	}
	return scripts
}

func byName(scripts []Script) map[string]string {
	m := map[string]string{}
	for _, s := range scripts {
		name := s.Name()
		if !strings.HasSuffix(name, ".ps1") {
			name += ".ps1"
		}
		m[name] = s.Text
	}
	return m
}

// TestGrammar: every script through the PowerShell grammar (pscheck also
// checks that the grammar fails a broken script).
func TestGrammar(t *testing.T) {
	pscheck.Check(t, byName(all(t)))
}

// modules are the modules of the cmdlets hwk's scripts call, as Windows
// PowerShell 5.1 on Windows Server 2022 and Windows 10/11 has them; each
// module's reference lists its cmdlets:
// https://learn.microsoft.com/en-us/powershell/module/MODULE/?view=powershell-5.1
// (for the Microsoft.PowerShell.* and CimCmdlets modules) and
// https://learn.microsoft.com/en-us/powershell/module/MODULE/?view=windowsserver2022-ps
// (for the others). A cmdlet called by its bare name can be replaced by an
// alias or function of the same name (a profile's, or a module's), so
// every call names its module.
var modules = map[string][]string{
	"Microsoft.PowerShell.Core":        {"ForEach-Object", "Where-Object", "Out-Null", "Get-Module", "Import-Module", "Get-Command", "Wait-Job", "Stop-Job", "Remove-Job"},
	"Microsoft.PowerShell.Utility":     {"Select-Object", "Sort-Object", "New-Object", "ConvertTo-Json", "ConvertFrom-Json", "Start-Sleep", "Write-Output", "Out-String", "Format-List", "Invoke-WebRequest", "Get-FileHash", "Get-Date", "New-TimeSpan"},
	"Microsoft.PowerShell.Archive":     {"Expand-Archive"},
	"Microsoft.PowerShell.Diagnostics": {"Get-WinEvent"},
	"Microsoft.PowerShell.Management":  {"Get-Service", "Start-Service", "Restart-Service", "Set-Service", "Stop-Service", "Test-Path", "New-Item", "Remove-Item", "Move-Item", "Copy-Item", "Get-Content", "Set-Content", "Get-ChildItem", "New-ItemProperty", "Get-ItemProperty", "Remove-ItemProperty", "Start-Process", "Get-Item", "Join-Path", "Split-Path", "Get-Process", "Rename-Computer", "Restart-Computer", "Stop-Computer"},
	"Microsoft.PowerShell.Host":        {"Start-Transcript", "Stop-Transcript"},
	"CimCmdlets":                       {"Get-CimInstance", "Invoke-CimMethod"},
	"Hyper-V":                          {"Get-VM", "New-VM", "Set-VM", "Start-VM", "Stop-VM", "Remove-VM", "New-VHD", "Get-VHD", "Resize-VHD", "Get-VMSwitch", "New-VMSwitch", "Remove-VMSwitch", "Set-VMNetworkAdapter", "Get-VMNetworkAdapter", "Remove-VMNetworkAdapter", "Set-VMFirmware", "Set-VMKeyProtector", "Enable-VMTPM", "Add-VMDvdDrive", "Set-VMComPort", "Get-VMHardDiskDrive"},
	"NetNat":                           {"Get-NetNat", "New-NetNat", "Remove-NetNat"},
	"NetTCPIP":                         {"Get-NetIPAddress", "New-NetIPAddress", "Remove-NetIPAddress", "Get-NetRoute", "New-NetRoute", "Remove-NetRoute", "Find-NetRoute", "Get-NetIPInterface", "Set-NetIPInterface"},
	"DnsClient":                        {"Get-DnsClientServerAddress", "Set-DnsClientServerAddress"},
	"NetAdapter":                       {"Get-NetAdapter"},
	// The Hyper-V firewall's cmdlets: Windows 11 22H2 and later (the
	// callers check for them first).
	"NetSecurity":    {"New-NetFirewallRule", "Get-NetFirewallRule", "Set-NetFirewallRule", "New-NetFirewallHyperVRule", "Get-NetFirewallHyperVRule", "Remove-NetFirewallHyperVRule"},
	"ScheduledTasks": {"Register-ScheduledTask", "Unregister-ScheduledTask", "New-ScheduledTaskTrigger", "New-ScheduledTaskAction", "New-ScheduledTaskSettingsSet"},
	"Dism":           {"Enable-WindowsOptionalFeature"},
	"Storage":        {"Get-Volume", "Get-Partition", "Get-PartitionSupportedSize", "Resize-Partition"},
	// Windows Server 2019 and later; hwk's node images are 2022 and 2025.
	"HostNetworkingService": {"Get-HnsNetwork", "Get-HnsEndpoint", "Get-HnsPolicyList", "Remove-HnsPolicyList"},
}

// unqualified says what is wrong with invoking the command word w in a
// script that defines funcs; "" when nothing is: a cmdlet by its module-
// qualified name, one of the script's own functions, a program by a name
// ending in .exe, or after & or . an expression (a path, a variable).
func unqualified(c pscheck.Command, funcs []string) string {
	if c.Expr || slices.Contains(funcs, c.Name) || strings.HasSuffix(strings.ToLower(c.Name), ".exe") {
		return ""
	}
	module, name, ok := strings.Cut(c.Name, `\`)
	if !ok {
		for m, cmds := range modules {
			if slices.Contains(cmds, c.Name) {
				return fmt.Sprintf("calls %s without its module (%s\\%s)", c.Name, m, c.Name)
			}
		}
		return fmt.Sprintf("calls %s, which is not a cmdlet of a known module (add it to modules with its module) nor a program named with .exe", c.Name)
	}
	if !slices.Contains(modules[module], name) {
		for m, cmds := range modules {
			if slices.Contains(cmds, name) {
				return fmt.Sprintf("calls %s, but %s is in %s", c.Name, name, m)
			}
		}
		return fmt.Sprintf("calls %s, which modules does not list", c.Name)
	}
	return ""
}

// TestCommandWords: every command word of every script, as the grammar
// parses it, names its module, or is the script's own function or a
// program.
func TestCommandWords(t *testing.T) {
	n := 0
	for name, inv := range pscheck.Commands(t, byName(all(t))) {
		n += len(inv.Commands)
		for _, c := range inv.Commands {
			if why := unqualified(c, inv.Functions); why != "" {
				t.Errorf("%s %s", name, why)
			}
		}
	}
	t.Logf("%d command words checked", n)
}

// TestCommandWordsCatchBareCmdlet: the check fails a script that calls a
// cmdlet by its bare name, a cmdlet under the wrong module, and a program
// by a bare name.
func TestCommandWordsCatchBareCmdlet(t *testing.T) {
	got := pscheck.Commands(t, map[string]string{"bad.ps1": `function Local-Thing { 1 }
Local-Thing
if ((Get-Service -Name kubelet).Status -ne 'Running') { Microsoft.PowerShell.Utility\Start-Service kubelet }
icacls C:\k
& 'C:\k\kubelet.exe' --version
`})["bad.ps1"]
	var whys []string
	for _, c := range got.Commands {
		if why := unqualified(c, got.Functions); why != "" {
			whys = append(whys, c.Name+": "+why)
		}
	}
	want := []string{
		`Get-Service: calls Get-Service without its module (Microsoft.PowerShell.Management\Get-Service)`,
		`Microsoft.PowerShell.Utility\Start-Service: calls Microsoft.PowerShell.Utility\Start-Service, but Start-Service is in Microsoft.PowerShell.Management`,
		`icacls: calls icacls, which is not a cmdlet of a known module (add it to modules with its module) nor a program named with .exe`,
	}
	if !slices.Equal(whys, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(whys, "\n"), strings.Join(want, "\n"))
	}
}

// native reports whether command word c runs a program rather than a
// cmdlet, function or script: a name or quoted path ending in .exe, or a
// variable after & (which may hold either, so it is taken for one).
func native(c pscheck.Command) bool {
	name := strings.ToLower(c.Name)
	if !c.Expr {
		return strings.HasSuffix(name, ".exe")
	}
	switch {
	case strings.HasPrefix(name, "$"):
		return true
	case strings.HasPrefix(name, "'") || strings.HasPrefix(name, `"`):
		return strings.HasSuffix(strings.Trim(name, `'"`), ".exe")
	}
	return false // a script block or a parenthesized expression
}

// TestNoNativeUnderStop: no script runs a program while its
// $ErrorActionPreference is 'Stop'. Windows PowerShell 5.1 makes each line
// a program writes to stderr an error record whenever it captures the
// program's stderr (2>&1, or powershell.exe without a console, as in a
// HostProcess container, a scheduled task or an SSH command), and under
// 'Stop' the first record ends the script, and the program with it
// (PowerShell/PowerShell #3996, #4002; only PowerShell 7.1+ exempts
// programs, #13361). kube-proxy, kubeadm and containerd log to stderr.
// Upstream's scripts run programs under the default 'Continue'
// (sig-windows-tools hostprocess/calico/kube-proxy/start.ps1; Calico
// v3.31.0 node/windows-packaging/CalicoWindows/node/node-service.ps1).
func TestNoNativeUnderStop(t *testing.T) {
	n := 0
	for name, inv := range pscheck.Commands(t, byName(all(t))) {
		for _, c := range inv.Commands {
			if !native(c) {
				continue
			}
			n++
			if strings.EqualFold(c.EAP, "Stop") {
				t.Errorf("%s runs %s while $ErrorActionPreference is 'Stop': a line on its stderr would end the script; set 'Continue' around the call and check $LASTEXITCODE", name, c.Name)
			}
		}
	}
	t.Logf("%d program calls checked", n)
}

// TestNoNativeUnderStopCatches: the check sees the preference through a
// function's scope, a block handed to a function that sets its own, and
// an if's body.
func TestNoNativeUnderStopCatches(t *testing.T) {
	got := pscheck.Commands(t, map[string]string{"x.ps1": `$ErrorActionPreference = 'Stop'
function Invoke-Native([scriptblock]$command) {
    $ErrorActionPreference = 'Continue'
    & $command
}
function Run-Stopped { & 'C:\k\kubeadm.exe' version }
Invoke-Native { netsh.exe int ipv4 show config }
& $kubeProxy --version
if ($true) {
    $ErrorActionPreference = "Continue"
    & 'C:\k\kubelet.exe' --version
}
& ([ScriptBlock]::Create('1'))
`})["x.ps1"]
	var stopped []string
	for _, c := range got.Commands {
		if native(c) && c.EAP == "Stop" {
			stopped = append(stopped, c.Name)
		}
	}
	if want := []string{`'C:\k\kubeadm.exe'`, "$kubeProxy"}; !slices.Equal(stopped, want) {
		t.Errorf("programs under Stop: %q, want %q (all: %+v)", stopped, want, got.Commands)
	}
}

// looksLikePowerShell matches a Go string literal that holds PowerShell:
// a Verb-Noun command word, a .NET static call, or PowerShell's error
// preference.
var looksLikePowerShell = regexp.MustCompile(`\b(Add|Clear|ConvertFrom|ConvertTo|Copy|Disable|Enable|Expand|Export|ForEach|Get|Import|Install|Invoke|Join|Measure|Move|New|Out|Register|Remove|Rename|Restart|Select|Set|Sort|Split|Start|Stop|Test|Unregister|Wait|Where|Write)-[A-Z][A-Za-z]+\b|\$ErrorActionPreference|\[[A-Z][\w.]*\]::`)

// messages are declarations whose string literals name PowerShell
// commands for the user to run, in error messages and fixes; they send
// nothing.
var messages = map[string]string{
	"internal/drivers/hyperv.Driver.Preflight":          "the fix for a host hwk cannot check",
	"internal/drivers/hyperv.judge":                     "preflight's fixes",
	"internal/drivers/hyperv.Driver.checkSubnet":        "how to remove what is in the way",
	"internal/drivers/hyperv.otherNAT":                  "how to remove a NAT that keeps hwk's from being made",
	"pkg/cmd.newExecCommand":                            "an example command for hwk exec on a Windows node",
	"internal/drivers/hyperv.Driver.Create":             "how to remove a VM of the node's name",
	"internal/drivers/hyperv.confirmAddress":            "where to look for a VM's addresses",
	"internal/drivers/hyperv.Driver.runOnAdapter":       "where to look at an adapter that never got its IPv4 interface",
	"internal/drivers/hyperv.adapterMissing":            "the FullyQualifiedErrorIds of the errors EnsureNetwork waits out",
	"internal/nodeimage/winimage.UnattendOptions.check": "dism /Get-WimInfo, where the edition names come from",
	"internal/drivers/wsl2.Driver.unroute":              "how to remove the firewall rule kept for want of elevation",
	"pkg/cluster/internal/actions.bootPhase.lookAt":     "where to look when a Windows node's first boot stops (Get-Service containerd)",
}

// notSent are packages that hold PowerShell they never send.
var notSent = map[string]string{
	"internal/testing/pscheck":   "the grammar check's broken script",
	"internal/testing/pscatalog": "this catalog",
	"internal/testing/fakeprog":  "the tests' fake powershell.exe, which reads the session's lines",
	"internal/testing/pssim":     "the tests' model of Windows, which names the commands it runs",
}

// declared scans the Go files under root (not tests, testdata, hack or
// notSent) and returns the declarations whose string
// literals look like PowerShell, as "package.Decl".
func declared(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules"),
				rel == "hack", rel == "bin", rel == "site", notSent[filepath.ToSlash(rel)] != "":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		for _, decl := range f.Decls {
			var names []string
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				name := decl.Name.Name
				if decl.Recv != nil {
					typ := decl.Recv.List[0].Type
					if star, ok := typ.(*ast.StarExpr); ok {
						typ = star.X
					}
					if id, ok := typ.(*ast.Ident); ok {
						name = id.Name + "." + name
					}
				}
				names = []string{name}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					if v, ok := spec.(*ast.ValueSpec); ok {
						for _, n := range v.Names {
							names = append(names, n.Name)
						}
					}
				}
			}
			ps := false
			ast.Inspect(decl, func(n ast.Node) bool {
				if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING && looksLikePowerShell.MatchString(l.Value) {
					ps = true
				}
				return !ps
			})
			if ps {
				for _, n := range names {
					if n == "Scripts" {
						continue // the catalog itself
					}
					found = append(found, pkg+"."+n)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// catalogued is every declaration the catalog's keys name, as
// "package.Decl".
func catalogued(scripts []Script) map[string]bool {
	m := map[string]bool{}
	for _, s := range scripts {
		if s.Key == "" {
			continue
		}
		decls, _, _ := strings.Cut(s.Key, "/")
		for _, d := range strings.Split(decls, "+") {
			m[s.Source+"."+d] = true
		}
	}
	return m
}

// missing is what declared finds that is neither catalogued nor a message.
func missing(found []string, cat map[string]bool) []string {
	var out []string
	for _, d := range found {
		if !cat[d] && messages[d] == "" {
			out = append(out, d)
		}
	}
	return out
}

func moduleRoot() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "..")
}

// TestComplete: every declaration in hwk's Go source whose strings hold
// PowerShell makes a script of the catalog (or only a message), and every
// declaration the catalog names exists.
func TestComplete(t *testing.T) {
	scripts := all(t)
	found := declared(t, moduleRoot())
	if len(found) < 30 {
		t.Fatalf("the scan found %d declarations with PowerShell: %v", len(found), found)
	}
	for _, d := range missing(found, catalogued(scripts)) {
		t.Errorf("%s makes PowerShell that is not in the catalog: add it to its package's Scripts (or, if it only names a command for the user, to messages)", d)
	}
	for d := range catalogued(scripts) {
		if !slices.Contains(found, d) {
			t.Errorf("the catalog names %s, which the scan does not find: a stale key?", d)
		}
	}
	for d := range messages {
		if !slices.Contains(found, d) {
			t.Errorf("messages names %s, which holds no PowerShell: remove it", d)
		}
	}
	// Shipped .ps1 files are in the catalog too.
	var shipped []string
	for _, s := range scripts {
		if s.Key == "" {
			shipped = append(shipped, s.Source)
		}
	}
	err := filepath.WalkDir(moduleRoot(), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(moduleRoot(), path)
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && rel != ".") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".ps1") && !slices.Contains(shipped, filepath.ToSlash(rel)) {
			t.Errorf("%s is not in the catalog's files", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCompleteCatchesAMissingScript: a package that makes a script its
// Scripts does not list fails the completeness check.
func TestCompleteCatchesAMissingScript(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pkg", "thing")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := "package thing\n\nfunc listed() string { return `Microsoft.PowerShell.Management\\Get-Service kubelet` }\n\nfunc forgotten(n string) string { return \"Microsoft.PowerShell.Management\\\\Restart-Service \" + n }\n"
	if err := os.WriteFile(filepath.Join(dir, "thing.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := missing(declared(t, root), catalogued([]Script{{Source: "pkg/thing", Key: "listed", Text: "x"}}))
	if !slices.Equal(got, []string{"pkg/thing.forgotten"}) {
		t.Errorf("missing = %v, want [pkg/thing.forgotten]", got)
	}
}
