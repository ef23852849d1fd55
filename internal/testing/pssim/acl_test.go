package pssim

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestIcacls: a file Set-Content makes in C:\ProgramData\ssh inherits the
// folder's ACL (Authenticated Users read); icacls /inheritance:r /grant
// leaves only what it granted, with icacls's output; a localized name
// maps to nothing.
func TestIcacls(t *testing.T) {
	m := NewServer2022()
	m.makeSSHDir()
	const f = `C:\ProgramData\ssh\administrators_authorized_keys`
	r := run(t, m, "$ErrorActionPreference = 'Stop'\nMicrosoft.PowerShell.Management\\Set-Content -LiteralPath '"+f+"' -Value 'ssh-ed25519 AAAA k'\n")
	if a := m.fs.acl(f); r.Err != nil || a.Owner != sidSystem || !a.Has(sidAuthUsers, maskRX) || a.Protected {
		t.Fatalf("%+v, %+v", r, a)
	}
	r = run(t, m, "& icacls.exe '"+f+"' /inheritance:r /grant '*S-1-5-32-544:F' /grant '*S-1-5-18:F'\n\"status $LASTEXITCODE\"\n")
	want := "processed file: " + f + "|Successfully processed 1 files; Failed processing 0 files|status 0"
	if a := m.fs.acl(f); r.Err != nil || strings.Join(r.Output, "|") != want || len(a.ACEs) != 2 || !a.Has(sidAdmins, maskF) || !a.Has(sidSystem, maskF) || !a.Protected {
		t.Errorf("%+v, %+v", r, a)
	}
	r = run(t, m, "& icacls.exe '"+f+"' /grant 'Administratoren:F'\n\"status $LASTEXITCODE\"\n")
	if r.Err != nil || !slices.Contains(r.Output, "Administratoren: No mapping between account names and security IDs was done.") || !slices.Contains(r.Output, "status 1332") {
		t.Errorf("%+v", r)
	}
	if r := run(t, m, "& icacls.exe '"+f+"' /setintegritylevel H\n"); r.Err == nil {
		t.Errorf("an icacls switch the model does not know ran: %+v", r)
	}
}

// seedClone is a clone of hwk's image at its first boot, as winseed's
// model test has it but with sshd's own folder and configuration, sshd
// not started yet, and the seed's files on D:.
func seedClone(t *testing.T) *Machine {
	t.Helper()
	m := NewServer2022()
	m.WriteFile(`C:\Program Files\OpenSSH\sshd.exe`, []byte("MZ"))
	m.WriteFile(`C:\Program Files\OpenSSH\sshd_config_default`, []byte(SSHDConfigDefault))
	m.Services["sshd"] = &Service{Name: "sshd", DisplayName: "OpenSSH SSH Server", Status: "Stopped", StartType: "Automatic", BinPath: `C:\Program Files\OpenSSH\sshd.exe`}
	// The image's sshd ran once (its folder and sshd_config), the build
	// removed its host keys, and at this boot hwk-seed's task runs first.
	m.WriteFile(`C:\ProgramData\ssh\sshd_config`, []byte(SSHDConfigDefault))
	m.InsertCD("D", "cidata", map[string][]byte{
		"authorized_keys":          []byte("ssh-ed25519 AAAAcluster hwk\n"),
		"ssh_host_ed25519_key":     []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"),
		"ssh_host_ed25519_key.pub": []byte("ssh-ed25519 AAAAhost\n"),
	})
	return m
}

func seedScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../winseed/testdata/apply.ps1")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSeedScriptSSH runs hwk-seed's real script (winseed's golden copy)
// on a clone: Administrator's key login works and sshd serves the seed's
// host key, because the script protects both files; without its icacls
// on the host key, sshd ignores that key (Win32-OpenSSH reads private
// keys only when nobody else may).
func TestSeedScriptSSH(t *testing.T) {
	const hostKey = `C:\ProgramData\ssh\ssh_host_ed25519_key`
	script := seedScript(t)
	m := seedClone(t)
	if r := run(t, m, script); r.Err != nil || m.Halted != "restart" {
		t.Fatalf("%+v, halted %q", r, m.Halted)
	}
	if err := m.SSHLogin("ssh-ed25519 AAAAcluster"); err != nil {
		t.Error(err)
	}
	if !slices.Contains(m.SSHHostKeys(), hostKey) {
		t.Errorf("sshd's host keys %q lack the seed's", m.SSHHostKeys())
	}

	loose := strings.Replace(script, `Protect "$ssh\ssh_host_ed25519_key"`, "", 1)
	if loose == script {
		t.Fatal("the seed's script no longer protects its host key this way: update the test")
	}
	m = seedClone(t)
	if r := run(t, m, loose); r.Err != nil {
		t.Fatal(r.Err)
	}
	if slices.Contains(m.SSHHostKeys(), hostKey) {
		t.Error("sshd loaded a host key that Authenticated Users can read")
	}
}

// TestStrictModes: sshd refuses administrators_authorized_keys that
// someone besides SYSTEM, Administrators and the user may write, and
// does not start when its folder lets others write; this fails if the
// model stops checking ACLs.
func TestStrictModes(t *testing.T) {
	m := seedClone(t)
	const f = `C:\ProgramData\ssh\administrators_authorized_keys`
	r := run(t, m, "$ErrorActionPreference = 'Stop'\nMicrosoft.PowerShell.Management\\Set-Content -LiteralPath '"+f+"' -Value 'ssh-ed25519 AAAAcluster hwk'\nMicrosoft.PowerShell.Management\\Start-Service -Name sshd\n")
	if err := m.SSHLogin("ssh-ed25519 AAAAcluster"); r.Err != nil || err != nil {
		t.Fatalf("an inherited read-only ACL: %+v, %v", r, err)
	}
	run(t, m, "& icacls.exe '"+f+"' /grant '*S-1-5-32-545:M'\n")
	if err := m.SSHLogin("ssh-ed25519 AAAAcluster"); err == nil || !strings.Contains(err.Error(), "Try removing permissions for user: BUILTIN\\Users (S-1-5-32-545)") {
		t.Errorf("a key file Users may write: %v", err)
	}
	if err := m.SSHLogin("ssh-ed25519 AAAAother"); err == nil {
		t.Error("a key that is in no file logged in")
	}

	m = NewServer2022()
	m.WriteFile(`C:\Program Files\OpenSSH\sshd_config_default`, []byte(SSHDConfigDefault))
	m.Services["sshd"] = &Service{Name: "sshd", Status: "Stopped", StartType: "Manual", BinPath: `C:\Program Files\OpenSSH\sshd.exe`}
	r = run(t, m, "$ErrorActionPreference = 'Stop'\nMicrosoft.PowerShell.Management\\New-Item -ItemType Directory -Force -Path 'C:\\ProgramData\\ssh' | Microsoft.PowerShell.Core\\Out-Null\nMicrosoft.PowerShell.Management\\Start-Service -Name sshd\n")
	if r.Err == nil || !strings.Contains(strings.Join(m.Log, "\n"), "folder permissions are invalid") {
		t.Errorf("sshd started in a folder Users may write: %+v", r)
	}
}
