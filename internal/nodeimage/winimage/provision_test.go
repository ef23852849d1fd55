package winimage

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/format/isoimage"
	"github.com/hwk-dev/hwk/internal/testing/pssim"
)

// provisioned builds the build disk from inputs, and installs a model
// Windows Server 2022 from it (internal/testing/pssim): Setup, provision.ps1's
// two phases, sysprep.
func provisioned(t *testing.T, in BuildInputs, change func(*pssim.Machine)) (*pssim.Machine, error) {
	t.Helper()
	return provisionedOn(t, pssim.NewServer2022(), in, change)
}

// provisionedOn provisions as provisioned does, on the model machine m.
func provisionedOn(t *testing.T, m *pssim.Machine, in BuildInputs, change func(*pssim.Machine)) (*pssim.Machine, error) {
	t.Helper()
	image := filepath.Join(t.TempDir(), "build.iso")
	if err := BuildDisk(image, in); err != nil {
		t.Fatal(err)
	}
	_, files, err := isoimage.Read(image)
	if err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(m)
	}
	err = m.Setup(SeedLabel, files, firstLogonScript())
	t.Logf("console:\n%s", strings.Join(m.Console, "\n"))
	return m, err
}

// TestProvisionOnWindowsModel checks that the whole image build's guest
// side, run against the model, ends with sysprep powering the machine off,
// and "done:" on the console only then.
func TestProvisionOnWindowsModel(t *testing.T) {
	m, err := provisioned(t, inputs(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if last := m.Console[len(m.Console)-1]; !strings.HasPrefix(last, "hwk-provision: done:") || !m.Generalized {
		t.Errorf("last console line %q, generalized %v", last, m.Generalized)
	}
}

// TestProvisionClearsReadOnly checks that the build does not trip on the
// build disk's read-only files and leaves no installed file read-only, so
// later replacements and config edits work.
func TestProvisionClearsReadOnly(t *testing.T) {
	// Why: every file of the build disk is read-only on Windows (CDFS),
	// and copies keep the attribute, while OpenSSH's installer rewrites
	// openssh-events.man and sshd's first start copies sshd_config_default.
	m, err := provisioned(t, inputs(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files() {
		if f.ReadOnly {
			t.Errorf("%s is read-only", f.Path)
		}
	}
	cfg := m.File(`C:\ProgramData\ssh\sshd_config`)
	if cfg == nil || !strings.Contains(string(cfg.Data), "PasswordAuthentication no") || !strings.Contains(string(cfg.Data), "PubkeyAuthentication yes") {
		t.Errorf("sshd_config: %+v", cfg)
	}
	for _, p := range []string{`C:\Program Files\OpenSSH\sshd.exe`, `C:\k\kubelet.exe`, `C:\Program Files\containerd\containerd.exe`, `C:\Program Files\hwk\hwk-seed.exe`} {
		if m.File(p) == nil {
			t.Errorf("%s was not installed", p)
		}
	}
}

// TestProvisionWaitsForSysprep checks that a sysprep that fails is seen:
// the build prints FAILED with Sysprep's own error log, powers off, and
// never prints done.
func TestProvisionWaitsForSysprep(t *testing.T) {
	// Why: sysprep.exe is a GUI program, which & does not wait for.
	m, err := provisioned(t, inputs(t), func(m *pssim.Machine) { m.SysprepFails, m.SysprepExit = true, 1 })
	if err != nil {
		t.Fatalf("the machine did not power off: %v", err)
	}
	console := strings.Join(m.Console, "\n")
	if strings.Contains(console, "hwk-provision: done:") || !strings.Contains(console, "FAILED: sysprep did not generalize the machine (status 1, image state IMAGE_STATE_COMPLETE)") ||
		!strings.Contains(console, "SYSPRP RunExternalDlls") {
		t.Errorf("console:\n%s", console)
	}

	// Microsoft documents no exit statuses for sysprep: a machine it
	// generalized passes whatever its status.
	m, err = provisioned(t, inputs(t), func(m *pssim.Machine) { m.SysprepExit = 5 })
	if err != nil || !m.Generalized || !strings.HasPrefix(m.Console[len(m.Console)-1], "hwk-provision: done:") {
		t.Errorf("a generalized machine with status 5: %v, console %q", err, m.Console)
	}
}

// TestProvisionOpenSSHWarning checks that install-sshd.ps1 failing at its
// last step (wevtutil's warning on stderr under its own 'Stop') after it
// made the services does not end the build, and that failing before it
// made them does.
func TestProvisionOpenSSHWarning(t *testing.T) {
	m, err := provisioned(t, inputs(t), func(m *pssim.Machine) { m.WevtutilWarns = true })
	if err != nil || !m.Generalized || !strings.Contains(strings.Join(m.Console, "\n"), "install-sshd.ps1 exited with status 1, but the sshd service is there") {
		t.Errorf("%v; console %q", err, m.Console)
	}
	in := inputs(t)
	if err := os.Remove(filepath.Join(in.OpenSSHDir, "sshd.exe")); err != nil {
		t.Fatal(err)
	}
	m, err = provisioned(t, in, nil)
	if err != nil || m.Generalized || !strings.Contains(strings.Join(m.Console, "\n"), "FAILED: install-sshd.ps1 exited with status 1 and made no sshd service") {
		t.Errorf("%v; console %q", err, m.Console)
	}
}

// TestProvisionOnBattery checks that on a laptop on battery, which passes
// a battery to its Hyper-V guests, both startup tasks still start, do not
// stop, and wait for nothing else.
func TestProvisionOnBattery(t *testing.T) {
	m, err := provisioned(t, inputs(t), func(m *pssim.Machine) { m.OnBattery = true })
	if err != nil {
		t.Fatal(err)
	}
	seed := m.Tasks["hwk-seed"]
	if seed == nil || seed.DisallowStartIfOnBatteries || seed.StopIfGoingOnBatteries || seed.RunOnlyIfIdle || seed.RunOnlyIfNetworkAvailable {
		t.Errorf("hwk-seed task %+v", seed)
	}
}

// TestProvisionLeavesNoPassword checks that no file and no registry value
// of the captured disk holds the build's Administrator password, in plain
// text or hidden as an answer file hides it, and that no answer file is
// left where a clone's Setup would read it before its seed's.
func TestProvisionLeavesNoPassword(t *testing.T) {
	// Why: Panther had sysprep's copy, with the hidden password, before
	// (review 4, D8's residual).
	in := inputs(t)
	m, err := provisioned(t, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	pw := in.Unattend.AdminPassword
	if where := m.Secrets(pw, HiddenPassword(pw, "AdministratorPassword"), HiddenPassword(pw, "Password")); len(where) > 0 {
		t.Errorf("the build's password is on the captured disk in %v", where)
	}
	for _, p := range []string{`C:\hwk\sysprep-unattend.xml`, `C:\Windows\Panther\unattend.xml`, `C:\Windows\System32\Sysprep\unattend.xml`} {
		if f := m.File(p); f != nil {
			t.Errorf("%s is on the captured disk:\n%s", p, f.Data)
		}
	}
}

// TestProvisionKeepsRegistryKeys checks that keys that exist before the
// build (the feature overrides Microsoft's Known Issue Rollbacks use, a
// Windows Update policy, OpenSSH's) keep their values, which New-Item
// -Force would delete.
func TestProvisionKeepsRegistryKeys(t *testing.T) {
	const overrides, au, ssh = `HKLM:\SYSTEM\CurrentControlSet\Policies\Microsoft\FeatureManagement\Overrides`,
		`HKLM:\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate\AU`, `HKLM:\SOFTWARE\OpenSSH`
	m, err := provisioned(t, inputs(t), func(m *pssim.Machine) {
		m.Registry[strings.ToLower(au)] = map[string]any{"AUOptions": 2}
		m.Registry[strings.ToLower(ssh)] = map[string]any{"DefaultShellCommandOption": "/c"}
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.RegistryValue(overrides, "4103588492") != 1 || m.RegistryValue(overrides, "1114842764") == nil {
		t.Errorf("Overrides: %v", m.Registry[strings.ToLower(overrides)])
	}
	if m.RegistryValue(au, "AUOptions") != 2 || m.RegistryValue(au, "NoAutoUpdate") == nil {
		t.Errorf("AU: %v", m.Registry[strings.ToLower(au)])
	}
	if m.RegistryValue(ssh, "DefaultShellCommandOption") != "/c" || m.RegistryValue(ssh, "DefaultShell") == nil {
		t.Errorf("OpenSSH: %v", m.Registry[strings.ToLower(ssh)])
	}
}

// TestProvisionPhase2Again checks that a restart in the middle of phase 2
// runs it again from the top at the next boot, and that what it made the
// first time (services, firewall rules) does not stop it.
func TestProvisionPhase2Again(t *testing.T) {
	m, err := provisioned(t, inputs(t), func(m *pssim.Machine) { m.RestartAt = "phase 2: Microsoft Defender exclusions" })
	if err != nil || !m.Generalized {
		t.Fatalf("%v; console %q", err, m.Console)
	}
	if n := strings.Count(strings.Join(m.Console, "\n"), "phase 2: the kubelet"); n != 2 {
		t.Errorf("phase 2 ran %d times", n)
	}
	if p := m.Env["path"]; strings.Count(p, `C:\k`) != 1 {
		t.Errorf("Path %q", p)
	}
}

// TestProvisionDefenderLate checks that the exclusions are tried again
// while Defender's cmdlets fail (until its service runs), and that a
// Defender that never answers leaves the build going without them.
func TestProvisionDefenderLate(t *testing.T) {
	m, err := provisioned(t, inputs(t), func(m *pssim.Machine) { m.DefenderStarting = 2 })
	console := strings.Join(m.Console, "\n")
	if err != nil || !m.Generalized || !strings.Contains(console, "Defender refused the exclusions (try 2 of 6): Operation failed with the following error: 0x800106ba") ||
		!strings.Contains(console, "excluded containerd's and the kubelet's files from ConfigDefender's scans") {
		t.Errorf("%v; console:\n%s", err, console)
	}
	m, err = provisioned(t, inputs(t), func(m *pssim.Machine) { m.DefenderStarting = 100 })
	if err != nil || !m.Generalized || !strings.Contains(strings.Join(m.Console, "\n"), "going on without Defender exclusions") {
		t.Errorf("%v; console %q", err, m.Console)
	}
}

// TestProvisionFailureOneLine checks that the console's FAILED line is one
// line with the script's line number, however long the error.
func TestProvisionFailureOneLine(t *testing.T) {
	in := inputs(t)
	if err := os.Remove(filepath.Join(in.OpenSSHDir, "sshd.exe")); err != nil {
		t.Fatal(err)
	}
	m, _ := provisioned(t, in, nil)
	var failed string
	for _, l := range m.Console {
		if strings.HasPrefix(l, "hwk-provision: FAILED:") {
			failed = l
		}
	}
	if failed == "" || strings.Contains(failed, "\n") || !strings.Contains(failed, "(at provision.ps1 line ") {
		t.Errorf("FAILED line %q", failed)
	}
}

// TestProvisionHypervisorOffLast checks that the node gets Hyper-V's
// switch and its PowerShell module without the hypervisor, which is turned
// off after every other Hyper-V feature change.
func TestProvisionHypervisorOffLast(t *testing.T) {
	// Why last: so that no -All (which enables a feature's parents) can
	// turn it on again (review 4, D7).
	m, err := provisioned(t, inputs(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var hyperv []string
	for _, c := range m.FeatureChanges {
		if strings.Contains(c, "Hyper-V") {
			hyperv = append(hyperv, c)
		}
	}
	if len(hyperv) == 0 || hyperv[len(hyperv)-1] != "disable Microsoft-Hyper-V-Online" {
		t.Errorf("Hyper-V's feature changes, in order: %q", hyperv)
	}
	for _, want := range []string{"Containers", "Microsoft-Hyper-V", "Microsoft-Hyper-V-Management-PowerShell"} {
		if !slices.Contains(m.Features, want) {
			t.Errorf("features %q lack %s", m.Features, want)
		}
	}
	if slices.Contains(m.Features, "Microsoft-Hyper-V-Online") {
		t.Errorf("the hypervisor stays on: %q", m.Features)
	}
}

// TestCloneStartsSeed checks that a clone's first boot takes the
// Administrator password its seed's answer file gives it, and starts
// hwk-seed once whether or not its AtStartup trigger fires at that boot.
func TestCloneStartsSeed(t *testing.T) {
	// Why: that boot is Setup's OOBE boot, which nobody has seen run the
	// trigger yet; SetupComplete.cmd starts hwk-seed too, and Task
	// Scheduler ignores the second start (review 4, D8).
	for _, atStartup := range []bool{false, true} {
		m, err := provisioned(t, inputs(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		password, err := NewPassword()
		if err != nil {
			t.Fatal(err)
		}
		answer, err := CloneUnattend(CloneOptions{AdminPassword: password})
		if err != nil {
			t.Fatal(err)
		}
		started, err := m.FirstBoot(map[string][]byte{CloneAnswerFile: answer}, atStartup)
		if err != nil {
			t.Fatal(err)
		}
		if m.AdminPassword != password {
			t.Errorf("the clone's Administrator password is %q, not its seed's", m.AdminPassword)
		}
		if !slices.Equal(started, []string{"hwk-seed"}) {
			t.Errorf("AtStartup fired %v: the first boot started %q, want hwk-seed once", atStartup, started)
		}
	}
}

// TestProvisionOpensPorts checks that on Windows Server 2022 and 2025
// alike the node takes SSH, the kubelet and Calico's VXLAN on its network,
// which is Public (a static address, no domain).
func TestProvisionOpensPorts(t *testing.T) {
	// Why 2025 too: it comes with sshd and its rule OpenSSH-Server-In-TCP
	// for Domain and Private only, and the build must open that rule to
	// every profile and start a service that may be Disabled (review 4,
	// D4).
	for name, m := range map[string]*pssim.Machine{"2022": pssim.NewServer2022(), "2025": pssim.NewServer2025()} {
		t.Run(name, func(t *testing.T) {
			m, err := provisionedOn(t, m, inputs(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if last := m.Console[len(m.Console)-1]; !strings.HasPrefix(last, "hwk-provision: done:") {
				t.Fatalf("the build ended with %q", last)
			}
			if m.NetworkCategory != "Public" {
				t.Fatalf("the model's network is %s", m.NetworkCategory)
			}
			for _, p := range []struct {
				protocol string
				port     int
			}{{"TCP", 22}, {"TCP", 10250}, {"UDP", 4789}} {
				if !m.Allows(p.protocol, p.port) {
					t.Errorf("%s %d is not let in on a Public network", p.protocol, p.port)
				}
			}
			if s := m.Services["sshd"]; s == nil || s.StartType != "Automatic" {
				t.Errorf("sshd: %+v", s)
			}
		})
	}
}

// TestProvisionContainerdConfig checks that the config the build writes is
// containerd's own default (the real windows/amd64 output the model
// answers with) with Calico's CNI directories and the pinned sandbox
// image, each line edited in place.
func TestProvisionContainerdConfig(t *testing.T) {
	// Why: a config read as one string of Go's slice format once passed
	// every other test.
	in := inputs(t)
	m, err := provisioned(t, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := m.File(`C:\Program Files\containerd\config.toml`)
	if f == nil {
		t.Fatal("no config.toml")
	}
	lines := strings.Split(strings.ReplaceAll(string(f.Data), "\r\n", "\n"), "\n")
	want := map[string]int{"version = 4": 0, "bin_dirs = ['c:/opt/cni/bin']": 0, "conf_dir = 'c:/etc/cni/net.d'": 0, "sandbox = '" + in.PauseImage + "'": 0}
	for _, l := range lines {
		if _, ok := want[strings.TrimSpace(l)]; ok {
			want[strings.TrimSpace(l)]++
		}
	}
	for l, n := range want {
		if n != 1 {
			t.Errorf("config.toml has %q %d times, want once", l, n)
		}
	}
	if len(lines) < 200 {
		t.Errorf("config.toml has %d lines: not containerd's default\n%s", len(lines), f.Data)
	}
}

// TestProvisionRefusesCachedAnswerFile checks that the build fails rather
// than capture an answer file sysprep left in Panther (had its generalize
// pass cached the build disc's, with the build's password), which would
// outrank every clone's seed (review 6, A2).
func TestProvisionRefusesCachedAnswerFile(t *testing.T) {
	m, err := provisioned(t, inputs(t), func(m *pssim.Machine) { m.SysprepCachesDisc = true })
	if err != nil {
		t.Fatal(err)
	}
	if last := m.Console[len(m.Console)-1]; !strings.Contains(strings.Join(m.Console, "\n"), `FAILED: sysprep left an answer file, C:\Windows\Panther\unattend.xml,`) ||
		strings.Contains(strings.Join(m.Console, "\n"), "done:") {
		t.Errorf("the build ended with %q", last)
	}
}
