package pssim

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestStartServiceWaits: Start-Service waits for a slow service and
// warns every 2 seconds, as PowerShell's DoWaitForStatus does, unless
// -WarningAction silences it.
func TestStartServiceWaits(t *testing.T) {
	m := NewServer2022()
	m.Services["slow"] = &Service{Name: "slow", DisplayName: "Slow one", Status: "Stopped", StartType: "Manual", StartSeconds: 5}
	r := run(t, m, "$ErrorActionPreference = 'Stop'\nMicrosoft.PowerShell.Management\\Start-Service -Name slow\n")
	want := []string{"Waiting for service 'Slow one (slow)' to start...", "Waiting for service 'Slow one (slow)' to start..."}
	if r.Err != nil || m.Services["slow"].Status != "Running" || !slices.Equal(m.Warnings, want) {
		t.Errorf("%+v, warnings %q", r, m.Warnings)
	}
	m.Warnings = nil
	m.Services["slow"].Status = "Stopped"
	r = run(t, m, "Microsoft.PowerShell.Management\\Start-Service -Name slow -WarningAction SilentlyContinue\n")
	if r.Err != nil || len(m.Warnings) != 0 {
		t.Errorf("%+v, warnings %q", r, m.Warnings)
	}
	m.Services["broken"] = &Service{Name: "broken", Status: "Stopped", StartType: "Manual", FailStart: "exit 1"}
	r = run(t, m, "$ErrorActionPreference = 'Stop'\nMicrosoft.PowerShell.Management\\Start-Service -Name broken\n")
	if r.Err == nil || !strings.Contains(r.Err.Error(), "Failed to start service 'broken (broken)'.") {
		t.Errorf("a service that exits as it starts: %+v", r)
	}
}

// TestServiceDependencies: sc.exe create's depend= makes Start-Service
// start the dependency first; Stop-Service of a service others need
// fails without -Force; Restart-Service stops, then starts again, every
// service it stopped.
func TestServiceDependencies(t *testing.T) {
	m := NewServer2022()
	m.Services["containerd"] = &Service{Name: "containerd", DisplayName: "Containerd", Status: "Stopped", StartType: "Automatic", StopSeconds: 3}
	r := run(t, m, `$ErrorActionPreference = 'Stop'
sc.exe create kubelet binPath= 'C:\k\hwk-kubelet.exe' start= demand depend= containerd DisplayName= 'Kubernetes kubelet'
"status $LASTEXITCODE"
sc.exe create kubelet binPath= 'C:\k\hwk-kubelet.exe'
"status $LASTEXITCODE"
Microsoft.PowerShell.Management\Start-Service -Name kubelet
`)
	want := "[SC] CreateService SUCCESS|status 0|[SC] CreateService FAILED 1073:||The specified service already exists.||status 1073"
	if r.Err != nil || strings.Join(r.Output, "|") != want {
		t.Fatalf("%+v", r)
	}
	if m.Services["containerd"].Status != "Running" || m.Services["kubelet"].Status != "Running" {
		t.Errorf("containerd %s, kubelet %s", m.Services["containerd"].Status, m.Services["kubelet"].Status)
	}
	r = run(t, m, "$ErrorActionPreference = 'Stop'\nMicrosoft.PowerShell.Management\\Stop-Service -Name containerd\n")
	if r.Err == nil || !strings.Contains(r.Err.Error(), "Cannot stop service 'Containerd (containerd)' because it has dependent services. It can only be stopped if the Force flag is set.") {
		t.Errorf("%+v", r)
	}
	m.Log = nil
	r = run(t, m, "$ErrorActionPreference = 'Stop'\nMicrosoft.PowerShell.Management\\Restart-Service -Name containerd -Force\n")
	if r.Err != nil || m.Services["kubelet"].Status != "Running" || !slices.Equal(m.Warnings, []string{"Waiting for service 'Containerd (containerd)' to stop..."}) {
		t.Errorf("%+v, warnings %q", r, m.Warnings)
	}
	m.Services["containerd"].StartType = "Disabled"
	m.Services["containerd"].Status = "Stopped"
	m.Services["kubelet"].Status = "Stopped"
	r = run(t, m, "$ErrorActionPreference = 'Stop'\nMicrosoft.PowerShell.Management\\Start-Service -Name kubelet\n")
	if r.Err == nil || !strings.Contains(strings.Join(m.Log, "\n"), "1068: The dependency service or group failed to start.") {
		t.Errorf("kubelet started with containerd disabled: %+v", r)
	}
}

// TestSCExe: sc.exe's messages and statuses, the "name= value" form it
// insists on, and the start types and recovery settings it stores.
func TestSCExe(t *testing.T) {
	m := NewServer2022()
	r := run(t, m, `sc.exe config nosuch start= auto
"status $LASTEXITCODE"
sc.exe config winrm start= delayed-auto
sc.exe create kubelet binPath= 'C:\k\hwk-kubelet.exe' start= demand depend= containerd
sc.exe failure kubelet reset= 0 actions= restart/5000/restart/5000/restart/5000
sc.exe failureflag kubelet 1
`)
	want := "[SC] OpenService FAILED 1060:||The specified service does not exist as an installed service.||status 1060|" +
		"[SC] ChangeServiceConfig SUCCESS|[SC] CreateService SUCCESS|[SC] ChangeServiceConfig2 SUCCESS|[SC] ChangeServiceConfig2 SUCCESS"
	if r.Err != nil || strings.Join(r.Output, "|") != want {
		t.Fatalf("%+v", r)
	}
	w, k := m.Services["winrm"], m.Services["kubelet"]
	if w.StartType != "Automatic" || !w.Delayed {
		t.Errorf("winrm: %+v", w)
	}
	if !slices.Equal(k.Recovery, []string{"restart/5000", "restart/5000", "restart/5000"}) || !k.FailureActionsOnNonCrash || k.ResetSeconds != 0 {
		t.Errorf("kubelet: %+v", k)
	}
	for _, bad := range []string{"sc.exe config winrm start=auto", "sc.exe failure kubelet actions= restart/5000", "sc.exe qc kubelet"} {
		if r := run(t, m, bad+"\n"); r.Err == nil {
			t.Errorf("%s ran: %+v", bad, r)
		}
	}
	if r := run(t, m, "$ErrorActionPreference = 'Stop'\nMicrosoft.PowerShell.Management\\Set-Service -Name winrm -StartupType AutomaticDelayedStart\n"); r.Err == nil {
		t.Error("PowerShell 5.1's Set-Service took AutomaticDelayedStart")
	}
}

// TestProvisionServiceLines runs the sc.exe and containerd lines of
// node-images/windows/provision.ps1 and checks what they leave: kubelet
// Manual, after containerd, restarted on every failure (exit codes too);
// containerd Automatic with its own recovery actions.
func TestProvisionServiceLines(t *testing.T) {
	src, err := os.ReadFile("../../../node-images/windows/provision.ps1")
	if err != nil {
		t.Fatal(err)
	}
	m := NewServer2022()
	m.WriteFile(`C:\Program Files\containerd\containerd.exe`, []byte("MZ"))
	lines := []string{"$ErrorActionPreference = 'Stop'", `$ctrd = 'C:\Program Files\containerd'`}
	re := regexp.MustCompile(`\{ (sc\.exe (create|failure|failureflag) kubelet .*) \}`)
	for _, g := range re.FindAllStringSubmatch(string(src), -1) {
		lines = append(lines, g[1], `if ($LASTEXITCODE -ne 0) { throw "exit $LASTEXITCODE" }`)
	}
	if len(lines) != 8 {
		t.Fatalf("provision.ps1's kubelet lines: %q", lines)
	}
	lines = append(lines, `& "$ctrd\containerd.exe" --register-service --config "$ctrd\config.toml"`, "Microsoft.PowerShell.Management\\Start-Service -Name kubelet")
	if r := run(t, m, strings.Join(lines, "\n")+"\n"); r.Err != nil {
		t.Fatal(r.Err)
	}
	k, c := m.Services["kubelet"], m.Services["containerd"]
	if k.StartType != "Manual" || !slices.Equal(k.DependsOn, []string{"containerd"}) || !k.FailureActionsOnNonCrash || len(k.Recovery) != 3 || k.Status != "Running" {
		t.Errorf("kubelet: %+v", k)
	}
	if c.StartType != "Automatic" || c.Status != "Running" || c.Recovery[0] != "restart/15000" {
		t.Errorf("containerd: %+v", c)
	}
}
