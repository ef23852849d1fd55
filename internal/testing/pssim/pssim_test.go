package pssim

import (
	"strings"
	"testing"
)

func run(t *testing.T, m *Machine, script string) Result {
	t.Helper()
	return m.Run(script, "test.ps1")
}

// TestUnknownCommandFails: a command the model does not know ends the
// run with an error that names it, instead of doing nothing.
func TestUnknownCommandFails(t *testing.T) {
	r := run(t, NewServer2022(), "$ErrorActionPreference = 'Stop'\nMicrosoft.PowerShell.Management\\Get-Widget -Name x\n")
	if r.Err == nil || !strings.Contains(r.Err.Error(), `Get-Widget`) || r.Exit != 1 {
		t.Errorf("%+v", r)
	}
	r = run(t, NewServer2022(), "& 'C:\\Windows\\frob.exe' /x\n")
	if r.Err == nil || !strings.Contains(r.Err.Error(), `frob.exe`) {
		t.Errorf("%+v", r)
	}
}

// TestReadOnlyFromCD: files on a CD are read-only, copies keep it,
// writing needs -Force, and clearing IsReadOnly works.
func TestReadOnlyFromCD(t *testing.T) {
	m := NewServer2022()
	m.InsertCD("D", "cidata", map[string][]byte{"dir/a.txt": []byte("a"), "b.txt": []byte("b")})
	r := run(t, m, `$ErrorActionPreference = 'Stop'
Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path 'C:\x' | Microsoft.PowerShell.Core\Out-Null
Microsoft.PowerShell.Management\Copy-Item -Recurse -Force -Path 'D:\*' -Destination 'C:\x'
Microsoft.PowerShell.Management\Set-Content -LiteralPath 'C:\x\dir\a.txt' -Value 'new'
`)
	if r.Err == nil || !strings.Contains(r.Err.Error(), `Access to the path 'C:\x\dir\a.txt' is denied.`) {
		t.Fatalf("write of a read-only copy: %+v", r)
	}
	if f := m.File(`C:\x\b.txt`); f == nil || !f.ReadOnly {
		t.Errorf("the copy of b.txt: %+v", f)
	}
	r = run(t, m, `$ErrorActionPreference = 'Stop'
Microsoft.PowerShell.Management\Set-Content -Force -LiteralPath 'C:\x\dir\a.txt' -Value 'forced'
Microsoft.PowerShell.Management\Get-ChildItem -LiteralPath 'C:\x' -Recurse -File | Microsoft.PowerShell.Core\ForEach-Object { $_.IsReadOnly = $false }
Microsoft.PowerShell.Management\Set-Content -LiteralPath 'C:\x\b.txt' -Value 'cleared'
`)
	if r.Err != nil || string(m.File(`C:\x\b.txt`).Data) != "cleared\r\n" || string(m.File(`C:\x\dir\a.txt`).Data) != "forced\r\n" {
		t.Errorf("%+v", r)
	}
}

// TestNewItemForceDeletesKey: PowerShell's registry provider removes an
// existing key before New-Item -Force makes it again.
func TestNewItemForceDeletesKey(t *testing.T) {
	m := NewServer2022()
	const k = `HKLM:\SYSTEM\CurrentControlSet\Policies\Microsoft\FeatureManagement\Overrides`
	if r := run(t, m, "Microsoft.PowerShell.Management\\New-Item -Force -Path '"+k+"' | Microsoft.PowerShell.Core\\Out-Null\n"); r.Err != nil {
		t.Fatal(r.Err)
	}
	if m.RegistryValue(k, "4103588492") != nil {
		t.Error("New-Item -Force kept the key's values")
	}
}

// TestGUIProgramNotWaited: & sysprep.exe returns at once and leaves
// $LASTEXITCODE as it was; Start-Process -Wait -PassThru has the status.
func TestGUIProgramNotWaited(t *testing.T) {
	m := NewServer2022()
	m.SysprepExit = 1
	r := run(t, m, `& "$env:SystemRoot\System32\Sysprep\sysprep.exe" /generalize /quiet
Microsoft.PowerShell.Utility\Write-Output "status $LASTEXITCODE"
$p = Microsoft.PowerShell.Management\Start-Process -FilePath "$env:SystemRoot\System32\Sysprep\sysprep.exe" -ArgumentList '/generalize', '/quit' -Wait -PassThru
Microsoft.PowerShell.Utility\Write-Output "exit $($p.ExitCode)"
`)
	if r.Err != nil || strings.Join(r.Output, "|") != "status 0|exit 1" {
		t.Errorf("%+v", r)
	}
}

// TestTaskSchedulerBatteryDefaults: a task registered without settings
// does not start on battery; one with the two switches does.
func TestTaskSchedulerBatteryDefaults(t *testing.T) {
	m := NewServer2022()
	m.OnBattery = true
	r := run(t, m, `$a = ScheduledTasks\New-ScheduledTaskAction -Execute 'powershell.exe' -Argument '-File C:\x.ps1'
$t = ScheduledTasks\New-ScheduledTaskTrigger -AtStartup
ScheduledTasks\Register-ScheduledTask -TaskName plain -Action $a -Trigger $t -User 'SYSTEM' -Force | Microsoft.PowerShell.Core\Out-Null
$s = ScheduledTasks\New-ScheduledTaskSettingsSet -AllowStartIfOnBatteries -DontStopIfGoingOnBatteries
ScheduledTasks\Register-ScheduledTask -TaskName battery -Action $a -Trigger $t -Settings $s -User 'SYSTEM' -Force | Microsoft.PowerShell.Core\Out-Null
`)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	started := m.Boot()
	if len(started) != 1 || started[0].Name != "battery" {
		t.Errorf("started %+v", started)
	}
}

// TestOneElementUnrolls: a pipeline of one item is the item, @() keeps
// a list, as PowerShell does.
func TestOneElementUnrolls(t *testing.T) {
	m := NewServer2022()
	r := run(t, m, `$one = NetAdapter\Get-NetAdapter -Physical
$list = @(NetAdapter\Get-NetAdapter -Physical)
Microsoft.PowerShell.Utility\Write-Output "$($one.Name) $($list.Count) $($list[0].Name)"
`)
	if r.Err != nil || strings.Join(r.Output, "|") != "Ethernet 1 1 Ethernet 1" {
		t.Errorf("%+v", r)
	}
}

// TestFirstBoot: a clone's first boot takes its Administrator password
// from the answer file of highest precedence (Panther's before the
// seed's), stops without one, and runs SetupComplete.cmd, whose
// schtasks.exe /run starts a task once and fails on a task that is not
// there, as schtasks.exe does.
func TestFirstBoot(t *testing.T) {
	const hidden = "cABhAHMAcwBBAGQAbQBpAG4AaQBzAHQAcgBhAHQAbwByAFAAYQBzAHMAdwBvAHIAZAA=" // "pass" + AdministratorPassword
	answer := func(value, plain string) map[string][]byte {
		return map[string][]byte{"unattend.xml": []byte(`<unattend><settings pass="oobeSystem"><component><UserAccounts><AdministratorPassword><Value>` +
			value + `</Value><PlainText>` + plain + `</PlainText></AdministratorPassword></UserAccounts></component></settings></unattend>`)}
	}
	m := NewServer2022()
	if _, err := m.FirstBoot(answer(hidden, "false"), true); err == nil {
		t.Error("a machine never generalized booted as a clone")
	}
	m.Tasks["seed"] = &Task{Name: "seed", AtStartup: true}
	m.Generalized = true
	m.WriteFile(setupComplete, []byte("@echo off\r\nrem start it\r\nschtasks.exe /run /tn seed\r\nexit /b 0\r\n"))
	started, err := m.FirstBoot(answer(hidden, "false"), true)
	if err != nil || len(started) != 1 || started[0] != "seed" || m.AdminPassword != "pass" {
		t.Errorf("started %q, password %q, %v", started, m.AdminPassword, err)
	}
	if f := m.File(`C:\Windows\Panther\unattend.xml`); f == nil || strings.Contains(string(f.Data), hidden) {
		t.Errorf("Setup's cached copy keeps the password: %v", f)
	}
	// The copy Setup cached and masked outranks the next seed's.
	m.Generalized = true
	if _, err := m.FirstBoot(answer("other", "true"), false); err == nil || !strings.Contains(err.Error(), "masked") {
		t.Errorf("a masked password in Panther: %v", err)
	}
	m.Generalized = true
	delete(m.fs.files, key(`C:\Windows\Panther\unattend.xml`))
	if _, err := m.FirstBoot(nil, false); err == nil || !strings.Contains(err.Error(), "no answer file") {
		t.Errorf("no answer file: %v", err)
	}
	m.Generalized = true
	m.WriteFile(setupComplete, []byte("schtasks.exe /run /tn other\r\n"))
	if _, err := m.FirstBoot(answer("other", "true"), false); err == nil || !strings.Contains(err.Error(), "ERROR: The system cannot find the file specified.") {
		t.Errorf("a missing task: %v", err)
	}
}

// TestFirewallProfiles: Server 2025's OpenSSH rule lets nothing in on a
// Public network until it is set to every profile; a new rule is for
// every profile by default, and a disabled sshd does not start.
func TestFirewallProfiles(t *testing.T) {
	m := NewServer2025()
	if m.Allows("TCP", 22) {
		t.Error("2025's OpenSSH rule lets SSH in on a Public network")
	}
	r := run(t, m, "$ErrorActionPreference = 'Stop'\n(NetSecurity\\Get-NetFirewallRule -Name OpenSSH-Server-In-TCP).Profile\n")
	if r.Err != nil || strings.Join(r.Output, "|") != "Domain, Private" {
		t.Errorf("%+v", r)
	}
	r = run(t, m, "$ErrorActionPreference = 'Stop'\nNetSecurity\\Set-NetFirewallRule -Name OpenSSH-Server-In-TCP -Enabled True -Profile Any\nNetSecurity\\New-NetFirewallRule -Name k -DisplayName k -Protocol TCP -LocalPort 10250 -Action Allow\n")
	if r.Err != nil || !m.Allows("TCP", 22) || !m.Allows("TCP", 10250) || m.Allows("UDP", 4789) {
		t.Errorf("%+v", r)
	}
	r = run(t, m, "$ErrorActionPreference = 'Stop'\nMicrosoft.PowerShell.Management\\Start-Service -Name sshd\n")
	if r.Err == nil || !strings.Contains(r.Err.Error(), "Service 'OpenSSH SSH Server (sshd)' cannot be started due to the following error: Cannot start service sshd on computer '.'.") {
		t.Errorf("a disabled sshd: %+v", r)
	}
}
