package winimage

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/hwk-dev/hwk/internal/testing/pscheck"
	"github.com/hwk-dev/hwk/node-images/windows"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; run with -update if the change is meant:\n%s", name, got)
	}
}

// xnode is any XML element, for asserting an answer file field by field.
type xnode struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Children []xnode    `xml:",any"`
	Text     string     `xml:",chardata"`
}

func (n xnode) attr(local string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// find follows a path of element names; a step "name[attr=value]" picks
// the child whose attribute matches.
func (n xnode) find(t *testing.T, path string) xnode {
	t.Helper()
	cur := n
	for _, step := range strings.Split(path, "/") {
		name, cond, _ := strings.Cut(strings.TrimSuffix(step, "]"), "[")
		k, v, _ := strings.Cut(cond, "=")
		found := false
		for _, c := range cur.Children {
			if c.XMLName.Local == name && (cond == "" || c.attr(k) == v) {
				cur, found = c, true
				break
			}
		}
		if !found {
			t.Fatalf("no %s in %s", step, path)
		}
	}
	return cur
}

func (n xnode) text(t *testing.T, path string) string {
	t.Helper()
	return strings.TrimSpace(n.find(t, path).Text)
}

var testOptions = UnattendOptions{
	Version:       "2022",
	Edition:       "Windows Server 2022 SERVERDATACENTERCORE",
	AdminPassword: "Hwk-Test.Passw0rd#2026",
}

func TestUnattendGolden(t *testing.T) {
	for name, o := range map[string]UnattendOptions{
		"autounattend-2022.xml": testOptions,
		"autounattend-2025-key.xml": {Version: "2025", Edition: "Windows Server 2025 Datacenter", AdminPassword: testOptions.AdminPassword,
			ProductKey: "AAAAA-BBBBB-CCCCC-DDDDD-EEEEE", Locale: "de-DE", ComputerName: "hwk-build-25"},
	} {
		got, err := Unattend(o)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, name, got)
	}
	got, err := CloneUnattend(CloneOptions{Locale: "en-US", AdminPassword: testOptions.AdminPassword})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "clone-unattend.xml", got)
}

// TestCloneUnattendFields checks that a clone's first boot asks nothing,
// sets the clone's own password and leaves its name to hwk-seed.
func TestCloneUnattendFields(t *testing.T) {
	raw, err := CloneUnattend(CloneOptions{Locale: testOptions.Locale, AdminPassword: testOptions.AdminPassword})
	if err != nil {
		t.Fatal(err)
	}
	var doc xnode
	if err := xml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("not XML: %v", err)
	}
	if got := doc.text(t, "settings[pass=specialize]/component[name=Microsoft-Windows-Shell-Setup]/ComputerName"); got != "*" {
		t.Errorf("computer name %q, want * (hwk-seed names the node)", got)
	}
	oobe := doc.find(t, "settings[pass=oobeSystem]/component[name=Microsoft-Windows-Shell-Setup]")
	for _, f := range []string{"HideEULAPage", "HideLocalAccountScreen", "HideOnlineAccountScreens", "HideWirelessSetupInOOBE", "SkipMachineOOBE"} {
		if oobe.text(t, "OOBE/"+f) != "true" {
			t.Errorf("OOBE/%s is not true", f)
		}
	}
	// Hidden, as Windows SIM writes it: Base64 of UTF-16LE password +
	// "AdministratorPassword".
	hidden, err := base64.StdEncoding.DecodeString(oobe.text(t, "UserAccounts/AdministratorPassword/Value"))
	u := make([]uint16, len(hidden)/2)
	for i := range u {
		u[i] = uint16(hidden[2*i]) | uint16(hidden[2*i+1])<<8
	}
	if err != nil || string(utf16.Decode(u)) != testOptions.AdminPassword+"AdministratorPassword" ||
		oobe.text(t, "UserAccounts/AdministratorPassword/PlainText") != "false" {
		t.Errorf("administrator password: %q, %v", string(utf16.Decode(u)), err)
	}
	if bytes.Contains(raw, []byte(testOptions.AdminPassword)) {
		t.Error("the clones' answer file holds the password in plain text")
	}
	if bytes.Contains(raw, []byte("AutoLogon")) || bytes.Contains(raw, []byte("FirstLogonCommands")) {
		t.Error("a clone would log on by itself")
	}
}

// provisionScript returns the recipe's provision.ps1.
func provisionScript(t *testing.T) string {
	t.Helper()
	raw, err := windows.Recipe.ReadFile("provision.ps1")
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// lacks fails t for each of wants that provision.ps1's text s lacks.
func lacks(t *testing.T, s string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(s, want) {
			t.Errorf("provision.ps1 lacks %q", want)
		}
	}
}

// TestProvisionScript checks what the provisioning script and the rest of
// hwk must agree on.
func TestProvisionScript(t *testing.T) {
	s := provisionScript(t)
	lacks(t, s,
		"Get-Volume -FileSystemLabel '"+SeedLabel+"'",
		// No /mode:vm: the disk goes to every hypervisor (issue 26).
		`-ArgumentList '/generalize', '/oobe', '/quit', '/quiet' -Wait -PassThru`,
		"if ($state -ne 'IMAGE_STATE_GENERALIZE_RESEAL_TO_OOBE') {",
		`--log-file 'C:\var\log\containerd\containerd.log'`,
		`binPath= 'C:\k\hwk-kubelet.exe'`,
		`"$work\bin\hwk-seed.exe"`,
		"Enable-WindowsOptionalFeature -Online -FeatureName Containers",
		"/featurename:Microsoft-Hyper-V-Online",
		"Add-FirewallRule kubelet 'kubelet (hwk)' TCP 10250", "Add-FirewallRule calico-vxlan 'Calico VXLAN (hwk)' UDP 4789",
		"PasswordAuthentication no",
		// Files reach the node over SFTP (issue 26).
		`if ($text -notmatch '(?m)^\s*Subsystem\s+sftp\s') {`,
		`Remove-Item -Force -Path "$env:ProgramData\ssh\ssh_host_*"`,
	)
}

// TestProvisionToleratesRestartPending checks that every dism.exe call
// takes 3010 (ERROR_SUCCESS_REBOOT_REQUIRED) and 1641 for success.
func TestProvisionToleratesRestartPending(t *testing.T) {
	// Why: DISM ends a feature change that waits for a restart with those,
	// and phase 1 restarts anyway; otherwise the image build stops at its
	// first feature (issue 26).
	s := provisionScript(t)
	lacks(t, s,
		"function Invoke-Native([string]$what, [scriptblock]$command, [int[]]$ok = @(0))",
		"if ($ok -notcontains $LASTEXITCODE) {",
		"$dismDone = @(0, 3010, 1641)",
	)
	calls := 0
	for _, line := range strings.Split(s, "\n") {
		// Install-Updates judges /add-package's statuses itself
		// (TestProvisionInstallsUpdates).
		if !strings.Contains(line, "dism.exe ") || strings.Contains(line, "/add-package") {
			continue
		}
		calls++
		if !strings.HasPrefix(strings.TrimSpace(line), "Invoke-Native ") || !strings.HasSuffix(strings.TrimSpace(line), "} $dismDone") {
			t.Errorf("a dism.exe call fails on a pending restart:\n%s", line)
		}
	}
	if calls == 0 {
		t.Error("provision.ps1 calls dism.exe nowhere: the test no longer checks anything")
	}
	// The Hyper-V PowerShell feature needs its parents (issue 26).
	if !strings.Contains(s, "-FeatureName Microsoft-Hyper-V-Management-PowerShell -All -NoRestart") {
		t.Error("Microsoft-Hyper-V-Management-PowerShell is enabled without -All")
	}
}

// TestProvisionKubeletRecovers checks that the kubelet service has the
// failure-actions flag set (SERVICE_FAILURE_ACTIONS_FLAG), without which
// its recovery actions do not apply to hwk-kubelet's non-zero exit.
func TestProvisionKubeletRecovers(t *testing.T) {
	s := provisionScript(t)
	failure := strings.Index(s, "sc.exe failure kubelet reset= 0 actions= restart/")
	flag := strings.Index(s, "{ sc.exe failureflag kubelet 1 }")
	if failure < 0 || flag < 0 || flag < failure {
		t.Errorf("kubelet recovery: failure actions at %d, failure-actions flag at %d; want both, the flag after", failure, flag)
	}
}

// TestUnattendFields reads the answer file as Windows Setup does and
// checks what makes the install unattended, UEFI and the right edition.
func TestUnattendFields(t *testing.T) {
	raw, err := Unattend(testOptions)
	if err != nil {
		t.Fatal(err)
	}
	var doc xnode
	if err := xml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the answer file is not XML: %v", err)
	}
	if doc.XMLName.Space != "urn:schemas-microsoft-com:unattend" || doc.XMLName.Local != "unattend" {
		t.Fatalf("root %v", doc.XMLName)
	}
	var passes []string
	for _, s := range doc.Children {
		passes = append(passes, s.attr("pass"))
		for _, c := range s.Children {
			if c.attr("processorArchitecture") != "amd64" || c.attr("publicKeyToken") != "31bf3856ad364e35" {
				t.Errorf("component %s in %s lacks amd64/public key token", c.attr("name"), s.attr("pass"))
			}
		}
	}
	if got := strings.Join(passes, " "); got != "windowsPE specialize oobeSystem" {
		t.Errorf("passes = %s", got)
	}

	setup := doc.find(t, "settings[pass=windowsPE]/component[name=Microsoft-Windows-Setup]")
	disk := setup.find(t, "DiskConfiguration/Disk")
	if disk.text(t, "DiskID") != "0" || disk.text(t, "WillWipeDisk") != "true" {
		t.Error("disk 0 is not wiped")
	}
	parts := disk.find(t, "CreatePartitions").Children
	if len(parts) != 3 {
		t.Fatalf("%d partitions, want EFI, MSR, Windows", len(parts))
	}
	for i, want := range []struct{ typ, size string }{{"EFI", "260"}, {"MSR", "16"}, {"Primary", ""}} {
		p := parts[i]
		if p.text(t, "Order") != string(rune('1'+i)) || p.text(t, "Type") != want.typ {
			t.Errorf("partition %d: %s", i+1, p.text(t, "Type"))
		}
		if want.size != "" && p.text(t, "Size") != want.size {
			t.Errorf("%s partition size %s, want %s", want.typ, p.text(t, "Size"), want.size)
		}
	}
	if parts[2].text(t, "Extend") != "true" {
		t.Error("the Windows partition does not take the rest of the disk")
	}
	mods := disk.find(t, "ModifyPartitions").Children
	if mods[0].text(t, "PartitionID") != "1" || mods[0].text(t, "Format") != "FAT32" ||
		mods[1].text(t, "PartitionID") != "3" || mods[1].text(t, "Format") != "NTFS" || mods[1].text(t, "Letter") != "C" {
		t.Errorf("partition formats: %+v", mods)
	}
	img := setup.find(t, "ImageInstall/OSImage")
	if img.text(t, "InstallFrom/MetaData/Key") != "/IMAGE/NAME" || img.text(t, "InstallFrom/MetaData/Value") != testOptions.Edition {
		t.Error("the edition is not picked by name")
	}
	if img.text(t, "InstallTo/DiskID") != "0" || img.text(t, "InstallTo/PartitionID") != "3" {
		t.Error("Windows does not go to disk 0 partition 3")
	}
	if setup.text(t, "UserData/AcceptEula") != "true" {
		t.Error("EULA not accepted: Setup would stop and ask")
	}

	oobe := doc.find(t, "settings[pass=oobeSystem]/component[name=Microsoft-Windows-Shell-Setup]")
	for _, f := range []string{"HideEULAPage", "HideLocalAccountScreen", "HideOnlineAccountScreens", "HideWirelessSetupInOOBE"} {
		if oobe.text(t, "OOBE/"+f) != "true" {
			t.Errorf("OOBE/%s is not true: OOBE would stop and ask", f)
		}
	}
	if oobe.text(t, "UserAccounts/AdministratorPassword/Value") != testOptions.AdminPassword ||
		oobe.text(t, "AutoLogon/Password/Value") != testOptions.AdminPassword ||
		oobe.text(t, "AutoLogon/Username") != "Administrator" || oobe.text(t, "AutoLogon/LogonCount") != "1" {
		t.Error("administrator password or automatic logon wrong")
	}
	cmd := oobe.find(t, "FirstLogonCommands/SynchronousCommand")
	if cmd.text(t, "CommandLine") != FirstLogonCommand() || cmd.text(t, "Order") != "1" {
		t.Errorf("first logon command = %q", cmd.text(t, "CommandLine"))
	}
	if got := doc.text(t, "settings[pass=specialize]/component[name=Microsoft-Windows-Shell-Setup]/ComputerName"); got != "hwk-build" {
		t.Errorf("computer name %q", got)
	}

	// Evaluation media need no key, and a ProductKey element without one
	// would make Setup ask.
	if bytes.Contains(raw, []byte("<ProductKey>")) {
		t.Error("a product key element without a key")
	}
}

func TestFirstLogonCommandIsPowerShell(t *testing.T) {
	if strings.Contains(firstLogonScript(), `"`) {
		t.Fatal("the first logon script has a double quote, which would end the -Command argument")
	}
	pscheck.Check(t, map[string]string{"first-logon.ps1": firstLogonScript()})
}

func TestUnattendRefusesBadOptions(t *testing.T) {
	for name, c := range map[string]struct {
		mod  func(*UnattendOptions)
		want string
	}{
		"version":     {func(o *UnattendOptions) { o.Version = "2019" }, `version "2019": use 2022 or 2025`},
		"edition":     {func(o *UnattendOptions) { o.Edition = " " }, "no edition"},
		"weak":        {func(o *UnattendOptions) { o.AdminPassword = "password" }, "at least 14 characters"},
		"classes":     {func(o *UnattendOptions) { o.AdminPassword = "alllowercaseletters" }, "lower case, upper case, digits and symbols"},
		"quote":       {func(o *UnattendOptions) { o.AdminPassword = "Hwk-Test.Passw0rd#2026<" }, "leave out quotes"},
		"key":         {func(o *UnattendOptions) { o.ProductKey = "ABCDE-12345" }, "product key"},
		"long name":   {func(o *UnattendOptions) { o.ComputerName = "hwk-build-node-2022" }, "at most 15"},
		"digits name": {func(o *UnattendOptions) { o.ComputerName = "2022" }, "not all digits"},
		"locale":      {func(o *UnattendOptions) { o.Locale = "english" }, "language tag"},
	} {
		t.Run(name, func(t *testing.T) {
			o := testOptions
			c.mod(&o)
			if _, err := Unattend(o); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func TestNewPassword(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		p, err := NewPassword()
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckPassword(p); err != nil || len(p) != 24 {
			t.Errorf("NewPassword() = %q: %v", p, err)
		}
		if seen[p] {
			t.Errorf("NewPassword repeated %q", p)
		}
		seen[p] = true
	}
}

// TestLogsApart checks that the first logon's redirect and provision.ps1's
// transcript are different files.
func TestLogsApart(t *testing.T) {
	// Why: with one file the transcript could not be opened and phase 1
	// would leave no log (issue 26).
	if !strings.Contains(provisionScript(t), "Start-Transcript -Append -Path '"+ProvisionLog+"'") {
		t.Errorf("provision.ps1's transcript is not %s", ProvisionLog)
	}
	cmd := FirstLogonCommand()
	if !strings.HasSuffix(strings.TrimSuffix(cmd, `"`), "*> "+FirstLogonLog) || strings.Contains(cmd, ProvisionLog) {
		t.Errorf("the first logon writes %q, want %s and not the transcript", cmd, FirstLogonLog)
	}
}

// TestProvisionDefenderExclusions checks that containerd's and the
// kubelet's files are out of Defender's real-time scans, when Defender is
// there, before the image's containers are imported (issue 26).
func TestProvisionDefenderExclusions(t *testing.T) {
	s := provisionScript(t)
	guard := strings.Index(s, `Microsoft.PowerShell.Core\Get-Command -Name Add-MpPreference -ErrorAction SilentlyContinue`)
	call := strings.Index(s, `& "$mpModule\Add-MpPreference" -ExclusionProcess @(`)
	absent := strings.Index(s, `Say 'phase 2: no Microsoft Defender here, so no exclusions to add'`)
	images := strings.Index(s, `Say 'phase 2: container images'`)
	if guard < 0 || call < guard || absent < call || images < absent {
		t.Errorf("Defender: guard %d, exclusions %d, the no-Defender branch %d, image import %d; want each after the last", guard, call, absent, images)
	}
	lacks(t, s, `"$ctrd\containerd.exe"`, `"$ctrd\containerd-shim-runhcs-v1.exe"`, `'C:\k\kubelet.exe'`,
		`-ExclusionPath @('C:\ProgramData\containerd', 'C:\var\lib\kubelet'`)
}

// cloneSettings are the settings the clone's answer file may use, by pass
// and component, each valid in that pass per Microsoft's Unattended
// Windows Setup Reference.
var cloneSettings = map[string][]string{
	// Why: Setup stops on a setting it does not know or in a pass that
	// does not take it, and no model here would notice (review 6, A3).
	// Each is checked against the reference
	// (learn.microsoft.com/windows-hardware/customize/desktop/unattend/).
	"specialize/Microsoft-Windows-Shell-Setup":              {"ComputerName", "TimeZone"},
	"specialize/Microsoft-Windows-ServerManager-SvrMgrNc":   {"DoNotOpenServerManagerAtLogon"},
	"oobeSystem/Microsoft-Windows-International-Core":       {"InputLocale", "SystemLocale", "UILanguage", "UserLocale"},
	"oobeSystem/Microsoft-Windows-Shell-Setup":              {"OOBE", "UserAccounts"},
	"oobeSystem/Microsoft-Windows-Shell-Setup/OOBE":         {"HideEULAPage", "HideLocalAccountScreen", "HideOnlineAccountScreens", "HideWirelessSetupInOOBE", "ProtectYourPC", "SkipMachineOOBE"},
	"oobeSystem/Microsoft-Windows-Shell-Setup/UserAccounts": {"AdministratorPassword"},
}

// TestCloneUnattendSettings checks that every setting of the clone's
// answer file is one its pass and component take, and that every
// component is amd64's with Microsoft's public key token.
func TestCloneUnattendSettings(t *testing.T) {
	raw, err := CloneUnattend(CloneOptions{AdminPassword: testOptions.AdminPassword})
	if err != nil {
		t.Fatal(err)
	}
	var doc xnode
	if err := xml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	check := func(where string, n xnode) {
		for _, c := range n.Children {
			if !slices.Contains(cloneSettings[where], c.XMLName.Local) {
				t.Errorf("%s: %s is not a setting hwk checked it takes", where, c.XMLName.Local)
			}
		}
	}
	for _, st := range doc.Children {
		for _, comp := range st.Children {
			where := st.attr("pass") + "/" + comp.attr("name")
			if comp.attr("processorArchitecture") != "amd64" || comp.attr("publicKeyToken") != "31bf3856ad364e35" || comp.attr("language") != "neutral" {
				t.Errorf("%s: attributes %v", where, comp.Attrs)
			}
			check(where, comp)
			for _, c := range comp.Children {
				if _, ok := cloneSettings[where+"/"+c.XMLName.Local]; ok {
					check(where+"/"+c.XMLName.Local, c)
				}
			}
		}
	}
}
