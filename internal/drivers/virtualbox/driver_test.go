package virtualbox

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/testing/vboxtest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// The node images' disks in the tests, by the UUIDs the transcripts name.
const (
	linuxUUID   = "4f3a1c52-8d0e-4b7a-9e61-2c5d7f80a913"
	windowsUUID = "b07e2d94-61c3-4f25-8a1e-93d4c6e5f208"
)

// testDriver returns a driver on a fake VBoxManage answering from transcript,
// with hwk's directories in a temporary home under a user name that is
// not ASCII (VBoxManage writes its paths back in the ANSI code page), and
// the node images in its cache.
func testDriver(t *testing.T, transcript string, vars ...string) (*Driver, *vboxtest.Fake, state.Dirs, *[]string) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "José")
	dirs := state.Dirs{Data: filepath.Join(home, "data"), Cache: filepath.Join(home, "cache"), Config: filepath.Join(home, "config")}
	vboxtest.WriteVDI(t, filepath.Join(dirs.Cache, "images", "linux", "disk.vdi"), linuxUUID, 20<<30)
	vboxtest.WriteVDI(t, filepath.Join(dirs.Cache, "images", "windows", "disk.vdi"), windowsUUID, 64<<30)
	v := map[string]string{"DATA": dirs.Data, "CACHE": dirs.Cache}
	for i := 0; i+1 < len(vars); i += 2 {
		v[vars[i]] = vars[i+1]
	}
	fake := vboxtest.New(t, transcript, v)
	var warns []string
	d := New(Options{Dirs: dirs, Runner: &CLI{}, Warn: func(s string) { warns = append(warns, s) },
		Hypervisor: func(context.Context) (bool, error) { return false, nil }})
	return d, fake, dirs, &warns
}

var clusterNet = drivers.Network{Cluster: "demo", Subnet: netip.MustParsePrefix("172.31.250.0/24")}

func nodeSpec(dirs state.Dirs, name string, os config.OS, role config.Role, ip string) drivers.MachineSpec {
	mem, disk := int64(4<<30), int64(20<<30)
	if os == config.Windows {
		mem, disk = 6<<30, 64<<30
	}
	s := drivers.MachineSpec{
		Ref: drivers.Ref{Cluster: "demo", Name: name}, Role: role, OS: os, Image: filepath.Join(dirs.Cache, "images", string(os), "disk.vdi"),
		CPUs: 2, MemoryBytes: mem, DiskBytes: disk, IP: netip.MustParseAddr(ip), Start: true,
	}
	if role == config.ControlPlane {
		s.Ports = []uint16{6443}
	}
	return s
}

func cp(dirs state.Dirs) drivers.MachineSpec {
	return nodeSpec(dirs, "demo-cp", config.Linux, config.ControlPlane, "172.31.250.10")
}
func win(dirs state.Dirs) drivers.MachineSpec {
	return nodeSpec(dirs, "demo-win-1", config.Windows, config.Worker, "172.31.250.11")
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestCreateLinuxAndWindows checks that the cluster's NAT Network is made
// once, that a Linux control plane and a Windows worker are made on
// differencing disks over their images' bases with the calls and settings
// each needs, and that doing it all again changes nothing.
func TestCreateLinuxAndWindows(t *testing.T) {
	d, fake, dirs, warns := testDriver(t, "create.txt")
	ctx := context.Background()
	for round := 1; round <= 2; round++ {
		must(t, "check subnet", d.CheckSubnet(ctx, clusterNet))
		must(t, "ensure network", d.EnsureNetwork(ctx, clusterNet))
		must(t, "create demo-cp", d.Create(ctx, cp(dirs)))
		must(t, "create demo-win-1", d.Create(ctx, win(dirs)))
	}
	fake.Check(t)
	if len(*warns) != 0 {
		t.Errorf("warnings: %q", *warns)
	}
	// Windows has no mode bits (Go shows 0666, or 0444 for a read-only
	// file); there a file is private by the ACL that the user's profile,
	// which holds hwk's directories, passes down.
	unix := runtime.GOOS != "windows"
	for _, n := range []string{"demo-cp", "demo-win-1"} {
		dir := filepath.Join(dirs.Data, "clusters", "demo", "virtualbox", n)
		for _, f := range []string{"cidata.iso", "known_hosts"} {
			fi, err := os.Stat(filepath.Join(dir, f))
			if err != nil {
				t.Errorf("%s: %v", n, err)
				continue
			}
			if f == "cidata.iso" && unix && fi.Mode().Perm() != 0o600 {
				t.Errorf("%s's seed is %v, want 0600 (it holds the node's host key)", n, fi.Mode().Perm())
			}
		}
	}
	if fi, err := os.Stat(filepath.Join(dirs.Data, "clusters", "demo", "virtualbox", "id_ed25519")); err != nil || (unix && fi.Mode().Perm() != 0o600) {
		t.Errorf("the cluster's SSH key: %v %v", fi, err)
	}
	for _, uuid := range []string{linuxUUID, windowsUUID} {
		if _, err := os.Stat(filepath.Join(dirs.Cache, "virtualbox", "bases", uuid+".vdi")); err != nil {
			t.Errorf("base: %v", err)
		}
	}
	ep, err := d.HostEndpoint(ctx, cp(dirs).Ref, 6443)
	if err != nil || ep.Addr() != loopback || ep.Port() == 0 {
		t.Errorf("API server endpoint: %v %v", ep, err)
	}
}

// TestCreateKeepsBaseSize checks that a node that asks for more disk than
// its image holds is still made, on the image's size, with a warning:
// VirtualBox cannot grow a differencing disk past its shared base.
func TestCreateKeepsBaseSize(t *testing.T) {
	d, _, dirs, warns := testDriver(t, "create.txt")
	ctx := context.Background()
	must(t, "ensure network", d.EnsureNetwork(ctx, clusterNet))
	spec := cp(dirs)
	spec.DiskBytes = 30 << 30
	must(t, "create demo-cp", d.Create(ctx, spec))
	if len(*warns) != 1 || !strings.Contains((*warns)[0], "node demo-cp: its disk stays at the node image's 20 GiB (VirtualBox cannot grow a disk made on a shared base)") {
		t.Errorf("warnings: %q", *warns)
	}
}

// TestCreateRefusals checks that a spec hwk cannot make, a VM of the name
// that hwk did not make, and a cluster without its network are refused
// before anything is made.
func TestCreateRefusals(t *testing.T) {
	d, fake, dirs, _ := testDriver(t, "refusals.txt")
	ctx := context.Background()
	bad := cp(dirs)
	bad.IP = netip.MustParseAddr("fd00::10")
	if err := d.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "IPv4") {
		t.Errorf("IPv6 node: %v", err)
	}
	bad = cp(dirs)
	bad.Image = filepath.Join(dirs.Cache, "images", "nope", "disk.vdi")
	var im *drivers.ImageMissingError
	if err := d.Create(ctx, bad); !errors.As(err, &im) || !strings.Contains(err.Error(), BuildCommand) {
		t.Errorf("missing image: %v", err)
	}
	var inUse *drivers.NameInUseError
	if err := d.Create(ctx, cp(dirs)); !errors.As(err, &inUse) || !strings.Contains(err.Error(), `VirtualBox VM "demo-cp"`) {
		t.Errorf("a VM of the name hwk did not make: %v", err)
	}
	if err := d.Create(ctx, win(dirs)); err == nil || !strings.Contains(err.Error(), "has no NAT Network hwk-demo") {
		t.Errorf("no network: %v", err)
	}
	var sub *drivers.SubnetInUseError
	if err := d.CheckSubnet(ctx, clusterNet); !errors.As(err, &sub) || !strings.Contains(err.Error(), `VirtualBox NAT Network "lab" (172.31.250.0/24)`) {
		t.Errorf("subnet in use: %v", err)
	}
	fake.Check(t)
}

// TestCreateReplacesPartial checks that a VM an earlier hwk began and did
// not finish is removed with its media and made again.
func TestCreateReplacesPartial(t *testing.T) {
	d, fake, dirs, warns := testDriver(t, "partial.txt")
	must(t, "create", d.Create(context.Background(), cp(dirs)))
	fake.Check(t)
	if len(*warns) != 1 || !strings.Contains((*warns)[0], "which an earlier hwk began and did not finish") {
		t.Errorf("warnings: %q", *warns)
	}
}

// TestLifecycle checks inspect, list, stop (the ACPI button, then waiting
// for power-off; a guest that ignores it is powered off) and start, each
// twice, for a Linux and a Windows node.
func TestLifecycle(t *testing.T) {
	d, fake, dirs, warns := testDriver(t, "lifecycle.txt")
	StopGrace, pollEvery = 300*time.Millisecond, 50*time.Millisecond
	t.Cleanup(func() { StopGrace, pollEvery = 60*time.Second, time.Second })
	ctx := context.Background()
	ms, err := d.List(ctx, "demo")
	if err != nil || len(ms) != 2 || ms[0].Name != "demo-cp" || ms[1].Name != "demo-win-1" || ms[1].OS != config.Windows || ms[1].IP.String() != "172.31.250.11" {
		t.Fatalf("list: %+v %v", ms, err)
	}
	for _, spec := range []drivers.MachineSpec{cp(dirs), win(dirs)} {
		for range 2 {
			must(t, "stop "+spec.Name, d.Stop(ctx, spec.Ref))
		}
		m, err := d.Inspect(ctx, spec.Ref)
		if err != nil || m.State != drivers.StateStopped || m.Role != spec.Role {
			t.Errorf("inspect %s after stop: %+v %v", spec.Name, m, err)
		}
		for range 2 {
			must(t, "start "+spec.Name, d.Start(ctx, spec.Ref))
		}
		m, err = d.Inspect(ctx, spec.Ref)
		if err != nil || m.State != drivers.StateRunning {
			t.Errorf("inspect %s after start: %+v %v", spec.Name, m, err)
		}
	}
	if len(*warns) != 1 || !strings.Contains((*warns)[0], "node demo-win-1 did not shut down") {
		t.Errorf("warnings: %q", *warns)
	}
	m, err := d.Inspect(ctx, drivers.Ref{Cluster: "other", Name: "demo-cp"})
	if err != nil || m.State != drivers.StateMissing {
		t.Errorf("another cluster's node: %+v %v", m, err)
	}
	fake.Check(t)
}

// TestDelete checks that deleting a node removes its VM with only its own
// media, its port forwards, and the base when no node uses it any more;
// that a node whose VM was removed by hand (its disk and seed left
// registered) leaves nothing either; that deleting again finds nothing to
// do; and that the network goes last, once.
func TestDelete(t *testing.T) {
	d, fake, dirs, _ := testDriver(t, "delete.txt")
	ctx := context.Background()
	for _, n := range []string{"demo-cp", "demo-win-1"} {
		must(t, "mkdir", os.MkdirAll(filepath.Join(dirs.Data, "clusters", "demo", "virtualbox", n), 0o700))
	}
	for range 2 {
		must(t, "delete demo-cp", d.Delete(ctx, cp(dirs).Ref))
	}
	for range 2 {
		must(t, "delete demo-win-1", d.Delete(ctx, win(dirs).Ref))
	}
	for range 2 {
		must(t, "delete network", d.DeleteNetwork(ctx, "demo"))
	}
	fake.Check(t)
	for _, n := range []string{"demo-cp", "demo-win-1"} {
		if _, err := os.Stat(filepath.Join(dirs.Data, "clusters", "demo", "virtualbox", n)); !os.IsNotExist(err) {
			t.Errorf("%s's directory is still there: %v", n, err)
		}
	}
}

// TestPreflight checks every reason VirtualBox cannot be used, with its
// fix.
func TestPreflight(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		transcript string
		hypervisor bool
		force      bool
		reason     string
		fix        string
		detail     string
	}{
		{transcript: "preflight-ok.txt", detail: "VirtualBox 7.1.4"},
		{transcript: "preflight-old.txt", reason: "VirtualBox 6.1.50 is too old", fix: "upgrade VirtualBox"},
		{transcript: "preflight-vboxdrv.txt", reason: "kernel module (vboxdrv) is not loaded", fix: "sudo /sbin/vboxconfig"},
		{transcript: "preflight-vtx.txt", reason: "Intel VT-x or AMD-V", fix: "firmware (BIOS/UEFI)"},
		{transcript: "preflight-version-only.txt", hypervisor: true, reason: "the Windows hypervisor is on", fix: "bcdedit /set hypervisorlaunchtype off"},
		{transcript: "preflight-ok.txt", hypervisor: true, force: true, detail: "VirtualBox 7.1.4; warning: the Windows hypervisor is on"},
	} {
		t.Run(c.transcript, func(t *testing.T) {
			d, fake, _, _ := testDriver(t, c.transcript)
			d.hypervisor = func(context.Context) (bool, error) { return c.hypervisor, nil }
			d.force = c.force
			detail, err := d.Preflight(ctx)
			fake.Check(t)
			if c.reason == "" {
				if err != nil || !strings.HasPrefix(detail, c.detail) {
					t.Errorf("preflight: %q %v", detail, err)
				}
				return
			}
			var ue *drivers.UnavailableError
			if !errors.As(err, &ue) || !strings.Contains(ue.Reason, c.reason) || !strings.Contains(ue.Fix, c.fix) {
				t.Errorf("preflight: %v", err)
			}
		})
	}
	t.Run("not installed", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		t.Setenv("VBOX_MSI_INSTALL_PATH", "")
		t.Setenv("VBOX_INSTALL_PATH", "")
		_, err := New(Options{Runner: &CLI{}}).Preflight(ctx)
		var ue *drivers.UnavailableError
		if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "VirtualBox is not installed") || !strings.Contains(ue.Fix, "winget install Oracle.VirtualBox") {
			t.Errorf("preflight: %v", err)
		}
	})
}

// TestInstall checks the Windows image install VM: pressing the space bar
// for the media's boot prompt, waiting for the guest to power off, and
// keeping only the disk.
func TestInstall(t *testing.T) {
	work := t.TempDir()
	d, fake, _, _ := testDriver(t, "install.txt", "WORK", work)
	pollEvery, pressFor, pressEvery = 10*time.Millisecond, 30*time.Millisecond, 10*time.Millisecond
	t.Cleanup(func() { pollEvery, pressFor, pressEvery = time.Second, 30*time.Second, 2*time.Second })
	err := d.Install(context.Background(), drivers.InstallSpec{
		Name: "hwk-install-win", Media: []string{filepath.Join(work, "server.iso"), filepath.Join(work, "build.iso")}, PressKey: true,
		Disk: filepath.Join(work, "disk.vdi"), DiskBytes: 64 << 30, CPUs: 2, MemoryBytes: 4 << 30, ConsoleLog: filepath.Join(work, "console.log"),
	})
	must(t, "install", err)
	fake.Check(t)
}

// TestCreateFailsCleansUp checks that a create that fails half-way
// removes the VM it made and the node's files, and reports which call
// failed and why.
func TestCreateFailsCleansUp(t *testing.T) {
	d, fake, dirs, _ := testDriver(t, "create-fails.txt")
	err := d.Create(context.Background(), cp(dirs))
	if err == nil || !strings.Contains(err.Error(), "create VM demo-cp: VBoxManage storagectl demo-cp: Storage controller named 'hwk' already exists") {
		t.Errorf("create: %v", err)
	}
	fake.Check(t)
	if _, err := os.Stat(filepath.Join(dirs.Data, "clusters", "demo", "virtualbox", "demo-cp")); !os.IsNotExist(err) {
		t.Errorf("the node's directory is still there: %v", err)
	}
}
