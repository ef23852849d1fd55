package hyperv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/format/isoimage"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	nodepkg "github.com/hwk-dev/hwk/pkg/node"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the transcript:\n%s", path, got)
	}
}

func testDriver(t *testing.T, f *fakePS) (*Driver, string, *[]string) {
	t.Helper()
	root := t.TempDir()
	var warns []string
	d := New(Options{Dirs: state.Dirs{Data: root, Cache: filepath.Join(root, "cache"), Config: filepath.Join(root, "config")},
		Runner: f, Warn: func(s string) { warns = append(warns, s) }})
	return d, root, &warns
}

// vhdx writes a stand-in golden VHDX (its file type identifier, then
// nothing).
func vhdx(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "disk.vhdx")
	if err := os.WriteFile(p, append([]byte("vhdxfile"), make([]byte, 1024)...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func mkdir(t *testing.T, elem ...string) string {
	t.Helper()
	p := filepath.Join(elem...)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

var clusterNet = drivers.Network{Cluster: "demo", Subnet: netip.MustParsePrefix("172.31.250.0/24")}

func nodeSpec(name string, os config.OS, role config.Role, ip, image string) drivers.MachineSpec {
	mem := int64(4 << 30)
	if os == config.Windows {
		mem = 6 << 30
	}
	return drivers.MachineSpec{
		Ref: drivers.Ref{Cluster: "demo", Name: name}, Role: role, OS: os, Image: image,
		CPUs: 2, MemoryBytes: mem, DiskBytes: 20 << 30, IP: netip.MustParseAddr(ip), Start: true,
	}
}

// TestCreateLinuxAndWindows checks the whole transcript of a cluster's
// network and its two nodes, a Linux control plane and a Windows worker,
// made on a fresh elevated host.
func TestCreateLinuxAndWindows(t *testing.T) {
	f := (&fakePS{t: t}).on("network/fresh", netFactsMark).quiet(netMakeMark).quiet(addressMark).
		on("create/fresh-windows", createFactsMark, "demo-win-1").
		on("create/fresh", createFactsMark).
		on("create/tpm", createMark, "Enable-VMTPM").
		on("create/no-tpm", createMark, "-EnableSecureBoot Off")
	d, root, warns := testDriver(t, f)
	ctx := context.Background()
	if err := d.EnsureNetwork(ctx, clusterNet); err != nil {
		t.Fatal(err)
	}
	linux := nodeSpec("demo-cp", config.Linux, config.ControlPlane, "172.31.250.10", vhdx(t, mkdir(t, root, "cache", "images", "linux")))
	win := nodeSpec("demo-win-1", config.Windows, config.Worker, "172.31.250.11", vhdx(t, mkdir(t, root, "cache", "images", "windows")))
	// The golden transcript shows both start actions: the Windows node
	// asks for autostart (StartIfRunning), the Linux one does not (Nothing).
	win.Autostart = true
	// And both disk sizes: the Linux node asks its image's 20 GiB, the
	// Windows one the default 64 GiB over its 40 GiB image.
	win.DiskBytes = 64 << 30
	for _, s := range []drivers.MachineSpec{linux, win} {
		if err := d.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if len(*warns) != 0 {
		t.Errorf("warnings: %v", *warns)
	}
	// Network: facts, the switch, then the address and NAT, once the
	// adapter's IPv4 interface is there.
	if len(f.scripts) != 7 {
		t.Fatalf("%d scripts:\n%s", len(f.scripts), f.transcript(root))
	}
	for i, want := range []string{
		"Hyper-V\\New-VMSwitch -Name 'hwk' -SwitchType Internal",
		"NetTCPIP\\Get-NetIPInterface -InterfaceAlias 'vEthernet (hwk)' -AddressFamily IPv4 | Microsoft.PowerShell.Core\\Out-Null\nNetTCPIP\\New-NetIPAddress -InterfaceAlias 'vEthernet (hwk)' -IPAddress '172.31.250.1' -PrefixLength 24",
		"NetNat\\New-NetNat -Name 'hwk' -InternalIPInterfaceAddressPrefix '172.31.0.0/16'",
	} {
		if mk := f.scripts[1+min(i, 1)]; !strings.Contains(mk, want) {
			t.Errorf("network script %d lacks %q:\n%s", 2+min(i, 1), want, mk)
		}
	}
	lin, wn := f.scripts[4], f.scripts[6]
	for _, c := range []struct {
		script string
		want   []string
		not    []string
	}{
		{lin, []string{"-Differencing", "-Generation 2", "-MemoryStartupBytes 2147483648", "-ProcessorCount 2 -DynamicMemory -MemoryMinimumBytes 1073741824 -MemoryMaximumBytes 4294967296", "-StaticMacAddress '00155D1FFA0A'",
			"-EnableSecureBoot Off", "Hyper-V\\Add-VMDvdDrive -VM $vm -Path", "cidata.iso", `-Path '\\.\pipe\hwk-demo-cp'`, "Hyper-V\\Start-VM -VM $vm",
			`"cluster":"demo"`, `"role":"control-plane"`, `"os":"linux"`}, []string{"MicrosoftWindows", "Enable-VMTPM", "Resize-VHD"}},
		{wn, []string{"-SecureBootTemplate MicrosoftWindows", "Hyper-V\\Enable-VMTPM -VM $vm", "-MemoryStartupBytes 3221225472", "-DynamicMemory -MemoryMinimumBytes 1073741824 -MemoryMaximumBytes 6442450944", "-StaticMacAddress '00155D1FFA0B'",
			`"os":"windows"`, "disk.vhdx' -SizeBytes 68719476736"}, []string{"-EnableSecureBoot Off"}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.script, w) {
				t.Errorf("create script lacks %q:\n%s", w, c.script)
			}
		}
		for _, w := range c.not {
			if strings.Contains(c.script, w) {
				t.Errorf("create script has %q:\n%s", w, c.script)
			}
		}
	}
	golden(t, "create-linux-and-windows.ps1", f.transcript(root))

	// The seed of the Windows node: its static address, the host's DNS,
	// the NIC's MAC, the cluster's key, and the pinned host key.
	seed := filepath.Join(root, "clusters", "demo", "hyperv", "demo-win-1", "cidata.iso")
	st, err := os.Stat(seed)
	// Windows has no mode bits (Go shows 0666, or 0444 for a read-only
	// file); there the file is private by the ACL that the user's profile,
	// which holds hwk's directories, passes down.
	if err != nil || (runtime.GOOS != "windows" && st.Mode().Perm() != 0o600) {
		t.Fatalf("seed %v %v", st, err)
	}
	_, files, err := isoimage.Read(seed)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(files["network"]); got != "ADDRESS=172.31.250.11/24\nGATEWAY=172.31.250.1\nDNS=192.168.1.1\n" {
		t.Errorf("network: %q", got)
	}
	if !strings.Contains(string(files["network-config"]), "mac_address: 00:15:5d:1f:fa:0b") {
		t.Errorf("network-config:\n%s", files["network-config"])
	}
	if !strings.HasPrefix(string(files["authorized_keys"]), "ssh-ed25519 ") || len(files["ssh_host_ed25519_key"]) == 0 {
		t.Error("the seed lacks the cluster's key or the node's host key")
	}
}

// TestEnsureNetworkIdempotent checks that with everything there nothing
// is made and no elevation is needed, and that the second cluster's
// subnet is refused while the first holds it.
func TestEnsureNetworkIdempotent(t *testing.T) {
	f := (&fakePS{t: t}).on("network/ready", netFactsMark)
	d, _, _ := testDriver(t, f)
	for range 2 {
		if err := d.EnsureNetwork(context.Background(), clusterNet); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.scripts) != 2 {
		t.Errorf("an existing network took %d scripts, want the facts twice", len(f.scripts))
	}
	other := drivers.Network{Cluster: "other", Subnet: netip.MustParsePrefix("172.31.250.0/25")}
	err := d.EnsureNetwork(context.Background(), other)
	// Another cluster's network is never offered for removal.
	if err == nil || !strings.Contains(err.Error(), "overlaps hwk cluster demo's Hyper-V network") || strings.Contains(err.Error(), "hwk down") {
		t.Errorf("a second cluster on the subnet: %v", err)
	}
}

// Error records of a new switch's host adapter before Windows has made its
// IPv4 interface, as Wrap's catch makes them.
var (
	// noInterface is Get-NetIPInterface's: the CIM cmdlets' record of a
	// query that matched nothing, with its message as Windows prints it for
	// Get-NetIPInterface -InterfaceIndex (Indigo744/wlanprofilemanager-ps#2)
	// and its id, category and exception as for Get-NetAdapter -Name
	// (CmdletizationQuery_NotFound_Name; pluralsight/PS-AutoLab-Env#199).
	noInterface = &PSError{Message: "No MSFT_NetIPInterface objects found with property 'InterfaceAlias' equal to 'vEthernet (hwk)'.  Verify the value of the property and retry.",
		ID: "CmdletizationQuery_NotFound_InterfaceAlias,Get-NetIPInterface", Category: "ObjectNotFound",
		Exception: "Microsoft.PowerShell.Cmdletization.Cim.CimJobException", Target: "vEthernet (hwk)"}
	// elementNotFound is New-NetIPAddress's
	// (Siemens-Healthineers/K2s#1131).
	elementNotFound = &PSError{Message: "Element not found.", ID: "Windows System Error 1168,New-NetIPAddress", Category: "ObjectNotFound",
		Exception: "Microsoft.Management.Infrastructure.CimException", Target: "MSFT_NetIPAddress"}
)

const interfaceMark = "NetTCPIP\\Get-NetIPInterface -InterfaceAlias 'vEthernet (hwk)' -AddressFamily IPv4"

// TestEnsureNetworkWaitsForAdapter checks that when, right after
// New-VMSwitch, the host's adapter has no IPv4 interface, then cannot be
// addressed yet ("Element not found"), EnsureNetwork asks again until it
// can, reports what it waits for, and makes the switch once.
func TestEnsureNetworkWaitsForAdapter(t *testing.T) {
	f := (&fakePS{t: t}).on("network/fresh", netFactsMark).
		failTimes(1, noInterface, interfaceMark).
		failTimes(1, elementNotFound, addressMark).
		quiet(netMakeMark).quiet(addressMark)
	d, _, _ := testDriver(t, f)
	d.adapterPoll = time.Millisecond
	w := ui.NewWait("the hyperv driver")
	if err := d.EnsureNetwork(ui.WithWait(context.Background(), w), clusterNet); err != nil {
		t.Fatal(err)
	}
	var switches, tries int
	for _, s := range f.scripts {
		if strings.Contains(s, netMakeMark) {
			switches++
		}
		if strings.Contains(s, addressMark) {
			tries++
		}
	}
	if switches != 1 || tries != 3 {
		t.Errorf("%d switch and %d address scripts, want 1 and 3:\n%s", switches, tries, strings.Join(f.scripts, "\n"))
	}
	if got, want := w.What(), "Windows to make the IPv4 interface of vEthernet (hwk)"; got != want {
		t.Errorf("waited for %q, want %q", got, want)
	}
}

// TestEnsureNetworkAdapterNeverReady checks that an adapter that never
// gets its IPv4 interface fails after the wait with what to do, and that
// any other error fails at once.
func TestEnsureNetworkAdapterNeverReady(t *testing.T) {
	f := (&fakePS{t: t}).on("network/fresh", netFactsMark).quiet(netMakeMark).fail(noInterface, interfaceMark)
	d, _, _ := testDriver(t, f)
	d.adapterWait, d.adapterPoll = 20*time.Millisecond, time.Millisecond
	err := d.EnsureNetwork(context.Background(), clusterNet)
	if err == nil || !strings.Contains(err.Error(), "had no IPv4 interface after 20ms (run hwk up again") || !strings.Contains(err.Error(), "No MSFT_NetIPInterface objects found") {
		t.Errorf("err = %v", err)
	}
	if tries := strings.Count(strings.Join(f.scripts, "\n"), interfaceMark); tries < 2 {
		t.Errorf("asked %d times", tries)
	}

	denied := &PSError{Message: "Access is denied.", ID: "Windows System Error 5,New-NetIPAddress", Category: "PermissionDenied", Exception: "Microsoft.Management.Infrastructure.CimException"}
	f = (&fakePS{t: t}).on("network/fresh", netFactsMark).quiet(netMakeMark).fail(denied, addressMark)
	d, _, _ = testDriver(t, f)
	err = d.EnsureNetwork(context.Background(), clusterNet)
	if err == nil || !strings.Contains(err.Error(), "Access is denied") || strings.Count(strings.Join(f.scripts, "\n"), addressMark) != 1 {
		t.Errorf("err = %v after:\n%s", err, strings.Join(f.scripts, "\n"))
	}
}

func TestEnsureNetworkRefusals(t *testing.T) {
	for name, c := range map[string]struct {
		facts  string
		subnet string
		want   string
	}{
		"not elevated":    {"network/fresh-not-elevated", "172.31.250.0/24", "run this hwk command once from an elevated PowerShell"},
		"vpn overlap":     {"network/vpn", "172.31.250.0/24", "overlaps host interface Corp VPN (172.31.250.77/24)"},
		"docker nat":      {"network/docker-nat", "172.31.250.0/24", "overlaps the host's NAT 'DockerNAT' (172.31.0.0/20)\n  fix: set networking.nodeSubnet in the cluster config to a range nothing else uses"},
		"another nat":     {"network/other-nat", "172.31.250.0/24", "the host has a NAT of its own, 'Bob''s NAT' (10.0.75.0/24), and Windows has one NAT per host"},
		"external switch": {"network/external-switch", "172.31.250.0/24", "exists but is External, not Internal"},
		"outside the nat": {"network/fresh", "10.99.0.0/24", "is outside 172.31.0.0/16, the range hwk's Hyper-V NAT covers"},
	} {
		t.Run(name, func(t *testing.T) {
			f := (&fakePS{t: t}).on(c.facts, netFactsMark)
			d, _, _ := testDriver(t, f)
			err := d.EnsureNetwork(context.Background(), drivers.Network{Cluster: "demo", Subnet: netip.MustParsePrefix(c.subnet)})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			// Only a NAT that keeps hwk's from being made at all is
			// worth the advice, with "if nothing uses it".
			if strings.Contains(err.Error(), "Remove-NetNat") != (name == "another nat") {
				t.Errorf("advice to remove a NAT hwk did not make: %v", err)
			}
			// What the subnet check refuses, up's host check refuses
			// before anything is made.
			if cerr := d.CheckSubnet(context.Background(), drivers.Network{Cluster: "demo", Subnet: netip.MustParsePrefix(c.subnet)}); name != "not elevated" && (cerr == nil || cerr.Error() != err.Error()) {
				t.Errorf("CheckSubnet = %v, EnsureNetwork = %v", cerr, err)
			}
			for _, s := range f.scripts {
				if strings.Contains(s, netMakeMark) || strings.Contains(s, "New-NetIPAddress") || strings.Contains(s, "New-NetNat") {
					t.Errorf("a refused network made something:\n%s", s)
				}
			}
		})
	}
}

// TestCreateRefusals checks that a name taken by a VM hwk did not make, a
// full drive, no DNS and no image are refused before anything is made.
func TestCreateRefusals(t *testing.T) {
	img := vhdx(t, t.TempDir())
	for name, c := range map[string]struct {
		facts string
		image string
		want  string
	}{
		"name taken": {"create/name-taken", img, "demo-cp is already used by Hyper-V VM 'demo-cp', which is not part of cluster demo"},
		"disk full":  {"create/disk-full", img, "3 GiB free on the drive of"},
		"no dns":     {"create/no-dns", img, "no IPv4 DNS server"},
		"no image":   {"create/fresh", filepath.Join(t.TempDir(), "missing.vhdx"), "hwk node-image build linux --formats vhdx"},
		"qcow2 image": {"create/fresh", func() string {
			p := filepath.Join(t.TempDir(), "disk.qcow2")
			os.WriteFile(p, []byte("QFI\xfb...."), 0o644)
			return p
		}(), "is not a VHDX disk"},
	} {
		t.Run(name, func(t *testing.T) {
			f := (&fakePS{t: t}).on("network/ready", netFactsMark).on(c.facts, createFactsMark)
			d, _, _ := testDriver(t, f)
			if err := d.EnsureNetwork(context.Background(), clusterNet); err != nil {
				t.Fatal(err)
			}
			err := d.Create(context.Background(), nodeSpec("demo-cp", config.Linux, config.ControlPlane, "172.31.250.10", c.image))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			for _, s := range f.scripts {
				if strings.Contains(s, "New-VM") || strings.Contains(s, "Remove-VM") {
					t.Errorf("a refused create changed VMs:\n%s", s)
				}
			}
		})
	}
	// Bad specs need no PowerShell at all.
	f := &fakePS{t: t}
	d, _, _ := testDriver(t, f)
	bad := nodeSpec("demo-cp", config.Linux, config.ControlPlane, "172.31.250.10", img)
	bad.MemoryBytes = 4<<30 + 1
	if err := d.Create(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "multiples of 2 MiB") {
		t.Errorf("odd memory: %v", err)
	}
	if len(f.scripts) != 0 {
		t.Errorf("a bad spec ran %d scripts", len(f.scripts))
	}
}

// TestCreateAgainKeepsHealthyVM checks that the cluster's VM made to the
// end for the same node, its files in place, is kept and started, with
// nothing removed or made: the driver contract, creating what exists
// succeeds and leaves it.
func TestCreateAgainKeepsHealthyVM(t *testing.T) {
	f := (&fakePS{t: t}).on("network/ready", netFactsMark).on("create/own-cp", createFactsMark).quiet(startMark)
	d, root, warns := testDriver(t, f)
	if err := d.EnsureNetwork(context.Background(), clusterNet); err != nil {
		t.Fatal(err)
	}
	spec := nodeSpec("demo-cp", config.Linux, config.ControlPlane, "172.31.250.10", vhdx(t, t.TempDir()))
	made(t, d, spec)
	if err := d.Create(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if n := len(f.scripts); n != 3 || !strings.Contains(f.scripts[2], startMark) {
		t.Errorf("transcript:\n%s", f.transcript(root))
	}
	if len(*warns) != 0 {
		t.Errorf("warnings: %q", *warns)
	}
}

// made puts the files Create makes for spec where it makes them.
func made(t *testing.T, d *Driver, spec drivers.MachineSpec) {
	t.Helper()
	mkdir(t, d.files().Machine(spec.Ref))
	for _, p := range []string{d.diskPath(spec.Ref), d.seedPath(spec.Ref)} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCreateAgainReplacesUnfitVM checks that a VM of the cluster that a
// cut-off Create left half-made, one made for another address, or one
// whose disk is gone is removed and made again, and the user is told why.
func TestCreateAgainReplacesUnfitVM(t *testing.T) {
	for name, c := range map[string]struct {
		facts string
		ip    string
		files bool
		want  string
	}{
		"half-made":     {"create/own-cp-partial", "172.31.250.10", true, "which an earlier hwk began and did not finish"},
		"other address": {"create/own-cp", "172.31.250.20", true, "made as linux control-plane node at 172.31.250.10, not linux control-plane at 172.31.250.20"},
		"disk gone":     {"create/own-cp", "172.31.250.10", false, "disk.vhdx is gone"},
	} {
		t.Run(name, func(t *testing.T) {
			f := (&fakePS{t: t}).on("network/ready", netFactsMark).on(c.facts, createFactsMark).
				quiet(deleteMark, "Hyper-V\\Remove-VM").on("create/no-tpm", createMark)
			d, root, warns := testDriver(t, f)
			if err := d.EnsureNetwork(context.Background(), clusterNet); err != nil {
				t.Fatal(err)
			}
			spec := nodeSpec("demo-cp", config.Linux, config.ControlPlane, c.ip, vhdx(t, t.TempDir()))
			if c.files {
				made(t, d, spec)
			}
			if err := d.Create(context.Background(), spec); err != nil {
				t.Fatal(err)
			}
			if n := len(f.scripts); n != 4 || !strings.Contains(f.scripts[2], "Hyper-V\\Remove-VM -VM $vm -Force") || !strings.Contains(f.scripts[3], createMark) {
				t.Errorf("transcript:\n%s", f.transcript(root))
			}
			if len(*warns) != 1 || !strings.Contains((*warns)[0], "node demo-cp: replacing its Hyper-V VM, ") || !strings.Contains((*warns)[0], c.want) {
				t.Errorf("warnings: %q, want %q", *warns, c.want)
			}
		})
	}
}

// TestCreateGrowsDisk checks that a node that asks for more disk than its
// image holds gets its differencing disk grown to that size (to a whole
// MiB) after New-VHD and before the VM is made, and that one that asks
// for the image's size or less gets the image's size, with a warning when
// it asked for less.
func TestCreateGrowsDisk(t *testing.T) {
	// Why after New-VHD: a differencing disk starts at its parent's size.
	for name, c := range map[string]struct {
		disk int64
		grow string // the Resize-VHD line; "" for none
		warn string
	}{
		"larger":        {64 << 30, "Hyper-V\\Resize-VHD -Path '%s' -SizeBytes 68719476736", ""},
		"not whole MiB": {30e9, "Hyper-V\\Resize-VHD -Path '%s' -SizeBytes 30000807936", ""},
		"the image's":   {20 << 30, "", ""},
		"smaller":       {10 << 30, "", "node demo-cp: its disk stays at the node image's 20 GiB; nodes[].disk asks for 10 GiB"},
	} {
		t.Run(name, func(t *testing.T) {
			f := (&fakePS{t: t}).on("network/ready", netFactsMark).on("create/fresh", createFactsMark).on("create/no-tpm", createMark)
			d, root, warns := testDriver(t, f)
			if err := d.EnsureNetwork(context.Background(), clusterNet); err != nil {
				t.Fatal(err)
			}
			spec := nodeSpec("demo-cp", config.Linux, config.ControlPlane, "172.31.250.10", vhdx(t, mkdir(t, root, "cache", "images", "linux")))
			spec.DiskBytes = c.disk
			if err := d.Create(context.Background(), spec); err != nil {
				t.Fatal(err)
			}
			if facts := f.scripts[1]; !strings.Contains(facts, "$image = Hyper-V\\Get-VHD -Path '"+spec.Image+"'") || !strings.Contains(facts, "image = [int64]$image.Size") {
				t.Errorf("the facts script does not ask the image's size:\n%s", facts)
			}
			script := f.scripts[len(f.scripts)-1]
			resize := strings.Index(script, "Hyper-V\\Resize-VHD")
			if c.grow == "" {
				if resize >= 0 {
					t.Errorf("the create script grows the disk:\n%s", script)
				}
			} else {
				want := fmt.Sprintf(c.grow, d.diskPath(spec.Ref))
				// Inside the try, so that a refused size removes the new disk.
				try, newVM := strings.Index(script, "try {"), strings.Index(script, "Hyper-V\\New-VM ")
				if !strings.Contains(script, want+"\n") || try < strings.Index(script, "Hyper-V\\New-VHD") || resize < try || resize > newVM {
					t.Errorf("the create script should run %q after New-VHD, inside the try and before New-VM:\n%s", want, script)
				}
			}
			if (c.warn == "") != (len(*warns) == 0) || (c.warn != "" && !strings.Contains((*warns)[0], c.warn)) {
				t.Errorf("warnings %q, want %q", *warns, c.warn)
			}
		})
	}
}

// TestCreateMarksPartialUntilDone checks that the create script gives the
// VM Notes marking it partial first, and hwk's final Notes only after
// every step except starting it.
func TestCreateMarksPartialUntilDone(t *testing.T) {
	f := (&fakePS{t: t}).on("network/ready", netFactsMark).on("create/fresh", createFactsMark).on("create/no-tpm", createMark)
	d, _, _ := testDriver(t, f)
	if err := d.EnsureNetwork(context.Background(), clusterNet); err != nil {
		t.Fatal(err)
	}
	if err := d.Create(context.Background(), nodeSpec("demo-cp", config.Linux, config.ControlPlane, "172.31.250.10", vhdx(t, t.TempDir()))); err != nil {
		t.Fatal(err)
	}
	script := f.scripts[len(f.scripts)-1]
	partial := strings.Index(script, `"ip":"172.31.250.10","partial":true}'`)
	final := strings.Index(script, `-Notes 'hwk:{"cluster":"demo","name":"demo-cp","role":"control-plane","os":"linux","ip":"172.31.250.10"}'`)
	last := strings.Index(script, "Hyper-V\\Get-VMHardDiskDrive")
	start := strings.Index(script, "Hyper-V\\Start-VM -VM $vm")
	if partial < 0 || final < last || start < final {
		t.Errorf("partial at %d, final Notes at %d, after the last step (%d) and before Start-VM (%d)?\n%s", partial, final, last, start, script)
	}
}

// TestCreateFailsWithRecord checks that Hyper-V refusing the VM comes back
// as its error record, and that the script removes what it made before
// passing it on.
func TestCreateFailsWithRecord(t *testing.T) {
	rec := &PSError{Message: "'demo-cp' failed to start. Not enough memory in the system to start the virtual machine demo-cp.",
		ID: "StartVMFailed,Microsoft.HyperV.PowerShell.Commands.StartVM", Category: "ResourceUnavailable",
		Exception: "Microsoft.HyperV.PowerShell.VirtualizationException"}
	f := (&fakePS{t: t}).on("network/ready", netFactsMark).on("create/fresh", createFactsMark).fail(rec, createMark)
	d, _, _ := testDriver(t, f)
	if err := d.EnsureNetwork(context.Background(), clusterNet); err != nil {
		t.Fatal(err)
	}
	err := d.Create(context.Background(), nodeSpec("demo-cp", config.Linux, config.ControlPlane, "172.31.250.10", vhdx(t, t.TempDir())))
	var pe *PSError
	if !errors.As(err, &pe) || pe.ID != rec.ID ||
		err.Error() != "create VM demo-cp: "+rec.Message+" (ResourceUnavailable)" {
		t.Fatalf("err = %v", err)
	}
	create := f.scripts[len(f.scripts)-1]
	undo := create[strings.Index(create, "} catch {"):]
	for _, w := range []string{"Hyper-V\\Remove-VM -VM $vm -Force", "disk.vhdx' -Force", "throw"} {
		if !strings.Contains(undo, w) {
			t.Errorf("the create script's undo lacks %q:\n%s", w, undo)
		}
	}
}

// TestLifecycle checks start, stop, inspect, list and delete of a Linux
// and a Windows node, each repeated, and delete after the VM was removed
// by hand.
func TestLifecycle(t *testing.T) {
	for _, n := range []struct {
		name, ip, golden string
		os               config.OS
		role             config.Role
		key              string // the node's replies: vm/KEY-off, vm/KEY-saved
	}{
		{"demo-cp", "172.31.250.10", "lifecycle-linux.ps1", config.Linux, config.ControlPlane, "cp"},
		{"demo-win-1", "172.31.250.11", "lifecycle-windows.ps1", config.Windows, config.Worker, "win"},
	} {
		t.Run(n.name, func(t *testing.T) {
			f := &fakePS{t: t}
			d, root, _ := testDriver(t, f)
			ref := drivers.Ref{Cluster: "demo", Name: n.name}
			ctx := context.Background()

			f.on("vm/"+n.key+"-off", inspectMark(n.name)).quiet(startMark).quiet(stopMark)
			m, err := d.Inspect(ctx, ref)
			if err != nil || m.State != drivers.StateStopped || m.Detail != "off" || m.OS != n.os || m.IP != netip.MustParseAddr(n.ip) || m.Role != n.role {
				t.Errorf("inspect: %+v %v", m, err)
			}
			for range 2 {
				if err := d.Start(ctx, ref); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				if err := d.Stop(ctx, ref); err != nil {
					t.Fatal(err)
				}
			}
			f.reset().on("vm/"+n.key+"-saved", inspectMark(n.name)).on("vm/list-three", listMark).quiet(deleteMark)
			if m, _ := d.Inspect(ctx, ref); m.State != drivers.StateOther || m.Detail != "saved" {
				t.Errorf("a saved VM: %+v", m)
			}
			// Another cluster's machine of the same name is not this one's.
			if m, _ := d.Inspect(ctx, drivers.Ref{Cluster: "other", Name: n.name}); m.State != drivers.StateMissing {
				t.Errorf("another cluster's VM: %+v", m)
			}
			ms, err := d.List(ctx, "demo")
			if err != nil || len(ms) != 2 || ms[0].Name != "demo-cp" || ms[1].OS != config.Windows || ms[1].State != drivers.StateStopped {
				t.Errorf("list: %+v %v", ms, err)
			}
			for range 2 {
				if err := d.Delete(ctx, ref); err != nil {
					t.Fatal(err)
				}
			}
			// Removed by hand in Hyper-V Manager: Get-VM finds nothing.
			f.reset().quiet(inspectMark(n.name)).quiet(deleteMark)
			if err := d.Delete(ctx, ref); err != nil {
				t.Fatal(err)
			}
			golden(t, n.golden, f.transcript(root))
			last := f.scripts[len(f.scripts)-1]
			if strings.Contains(last, "Remove-VM") || !strings.Contains(last, "Remove-Item -LiteralPath") {
				t.Errorf("deleting a VM removed by hand:\n%s", last)
			}
		})
	}
}

// TestListOneAndNone checks List on a host with exactly one hwk VM, where
// PowerShell hands over the object rather than an array of one, and on a
// host with none, where it hands over null.
func TestListOneAndNone(t *testing.T) {
	f := (&fakePS{t: t}).on("vm/list-one", listMark)
	d, _, _ := testDriver(t, f)
	ms, err := d.List(context.Background(), "demo")
	if err != nil || len(ms) != 1 || ms[0].Name != "demo-cp" || ms[0].State != drivers.StateRunning || ms[0].Role != config.ControlPlane {
		t.Errorf("one VM: %+v %v", ms, err)
	}
	f.reset().on("vm/list-none", listMark)
	if ms, err := d.List(context.Background(), "demo"); err != nil || len(ms) != 0 {
		t.Errorf("no VM: %+v %v", ms, err)
	}
}

// TestDeleteLeavesOthersVMs checks that a VM of the node's name that hwk
// did not make for this cluster is not removed.
func TestDeleteLeavesOthersVMs(t *testing.T) {
	f := (&fakePS{t: t}).on("vm/user-vm", inspectMark("demo-cp")).quiet(deleteMark)
	d, _, _ := testDriver(t, f)
	if err := d.Delete(context.Background(), drivers.Ref{Cluster: "demo", Name: "demo-cp"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(f.scripts[1], "Remove-VM") {
		t.Errorf("deleted a VM hwk did not make:\n%s", f.scripts[1])
	}
}

// TestDeleteNetwork checks that the cluster's gateway goes, that the
// switch and NAT go when no hwk VM is on the switch, and that without
// elevation the NAT stays, with a warning.
func TestDeleteNetwork(t *testing.T) {
	f := (&fakePS{t: t}).on("network/ready", netFactsMark).on("network/kept-nat", netDeleteMark)
	d, root, warns := testDriver(t, f)
	ctx := context.Background()
	if err := d.EnsureNetwork(ctx, clusterNet); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteNetwork(ctx, "demo"); err != nil {
		t.Fatal(err)
	}
	if len(*warns) != 1 || !strings.Contains((*warns)[0], "kept hwk's Hyper-V nat: removing it needs an elevated PowerShell") {
		t.Errorf("warnings %v", *warns)
	}
	// Again: nothing recorded, nothing sent.
	n := len(f.scripts)
	if err := d.DeleteNetwork(ctx, "demo"); err != nil || len(f.scripts) != n {
		t.Errorf("second delete: %v, %d scripts", err, len(f.scripts)-n)
	}
	golden(t, "delete-network.ps1", f.transcript(root))
}

// TestNodeConfirmsKVPAddress checks that a node's handle needs the guest
// to report its static address through KVP, or, for a Linux guest without
// a KVP daemon, to report none.
func TestNodeConfirmsKVPAddress(t *testing.T) {
	for name, c := range map[string]struct {
		vm, node string
		want     string
	}{
		"windows booting": {"vm/win-booting", "demo-win-1", "has not reported an address through Hyper-V's data exchange (KVP) yet"},
		"wrong ip":        {"vm/cp-running-apipa", "demo-cp", "reports 169.254.3.4, not its static 172.31.250.10"},
		"windows wrong":   {"vm/win-wrong-ip", "demo-win-1", "reports 172.31.250.99, not its static 172.31.250.11"},
		"off":             {"vm/cp-off", "demo-cp", "is off, not running; start it with `hwk start --name demo`"},
		// The address is confirmed: what fails is the missing SSH key,
		// which Create would have made.
		"ready":         {"vm/cp-running", "demo-cp", "SSH key"},
		"windows ready": {"vm/win-running", "demo-win-1", "SSH key"},
		"linux, no kvp": {"vm/cp-running-nokvp", "demo-cp", "SSH key"},
	} {
		t.Run(name, func(t *testing.T) {
			f := (&fakePS{t: t}).on(c.vm, inspectMark(c.node))
			d, _, _ := testDriver(t, f)
			if _, err := d.Node(context.Background(), testRef(c.node)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// connectTransport is a node's transport that only connects, as SSH's
// handshake with the pinned host key does, or fails to.
type connectTransport struct {
	err   error
	calls *int
}

func (c connectTransport) Run(_ context.Context, cmd nodepkg.Cmd) error {
	return fmt.Errorf("no command expected, got %q", cmd.Args)
}

func (c connectTransport) Connect(context.Context) error {
	*c.calls++
	return c.err
}

// TestNodeFallsBackToThePinnedHostKey checks that when KVP does not show a
// node's static address (Calico's HNS network moved it to a vEthernet
// adapter, issue 26; a guest still booting), the node is confirmed by SSH
// answering there with its pinned host key, and refused when it does not;
// a reported static address needs no handshake.
func TestNodeFallsBackToThePinnedHostKey(t *testing.T) {
	refused := errors.New("ssh 172.31.250.11:22: connect: connection refused")
	for name, c := range map[string]struct {
		vm       string
		connect  error
		want     string // "" for a handle
		connects int
	}{
		"moved, KVP reports nothing":            {"vm/win-moved-none", nil, "", 1},
		"moved, KVP reports other addresses":    {"vm/win-moved-other", nil, "", 1},
		"booting: no KVP address and no SSH":    {"vm/win-booting", refused, "has not reported an address through Hyper-V's data exchange (KVP) yet", 1},
		"seed not applied: wrong IP, no SSH":    {"vm/win-wrong-ip", refused, "reports 172.31.250.99, not its static 172.31.250.11: its seed was not applied; nor does SSH at 172.31.250.11 answer with the node's pinned host key (connect to node demo-win-1: ssh 172.31.250.11:22: connect: connection refused)", 1},
		"KVP shows the static address":          {"vm/win-running", refused, "", 0},
		"linux without KVP: SSH confirms later": {"vm/cp-running-nokvp", refused, "", 0},
	} {
		t.Run(name, func(t *testing.T) {
			node := "demo-win-1"
			if strings.HasPrefix(c.vm, "vm/cp-") {
				node = "demo-cp"
			}
			f := (&fakePS{t: t}).on(c.vm, inspectMark(node))
			d, _, _ := testDriver(t, f)
			calls := 0
			d.handle = func(name string, os config.OS, ip netip.Addr) (*nodepkg.Node, error) {
				return nodepkg.New(name, os, connectTransport{err: c.connect, calls: &calls}), nil
			}
			n, err := d.Node(context.Background(), testRef(node))
			switch {
			case c.want == "" && (err != nil || n == nil):
				t.Errorf("err = %v, want a handle", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("err = %v, want %q", err, c.want)
			}
			if calls != c.connects {
				t.Errorf("%d handshakes, want %d", calls, c.connects)
			}
		})
	}
}

func testRef(name string) drivers.Ref { return drivers.Ref{Cluster: "demo", Name: name} }

// TestPreflight checks each way a host falls short, with its fix.
func TestPreflight(t *testing.T) {
	for name, c := range map[string]struct {
		change map[string]any
		want   string
	}{
		"hyper-v off":    {map[string]any{"module": false, "featureState": 2}, "Enable-WindowsOptionalFeature -Online -FeatureName Microsoft-Hyper-V -All"},
		"reboot pending": {map[string]any{"rebootPending": true}, "restart Windows, then run hwk again"},
		"no hypervisor":  {map[string]any{"hypervisorPresent": false}, "bcdedit /set hypervisorlaunchtype auto"},
		"vmms stopped":   {map[string]any{"vmms": "Stopped"}, "(vmms) is stopped\n  fix: in an elevated PowerShell: `Start-Service vmms`"},
		"not allowed":    {map[string]any{"elevated": false}, "Add-LocalGroupMember -SID 'S-1-5-32-578' -Member $env:USERNAME"},
		"overlapping nat": {map[string]any{"nats": []any{map[string]any{"name": "WSLNat", "prefix": "172.31.240.0/20"}}},
			"NetNat\\Remove-NetNat -Name 'WSLNat'"},
		// Windows has one NAT per host (review 5, N1).
		"another nat": {map[string]any{"nats": []any{map[string]any{"name": "DockerNAT", "prefix": "10.0.75.0/24"}}},
			"the host has a NAT of its own, 'DockerNAT' (10.0.75.0/24), and Windows has one NAT per host"},
		"hwk's nat fine": {map[string]any{"nats": []any{map[string]any{"name": "hwk", "prefix": "172.31.0.0/16"}}}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakePS{t: t}
			f.on(f.patch("host/ready", c.change), preflightMark)
			d, _, _ := testDriver(t, f)
			detail, err := d.Preflight(context.Background())
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ue *drivers.UnavailableError
			if err == nil || !strings.Contains(err.Error(), c.want) || !errorAs(err, &ue) {
				t.Errorf("err = %v (detail %q), want an UnavailableError with %q", err, detail, c.want)
			}
		})
	}

	f := (&fakePS{t: t}).on("host/admin-group-vbox", preflightMark)
	d, _, _ := testDriver(t, f)
	detail, err := d.Preflight(context.Background())
	if err != nil || !strings.Contains(detail, "Hyper-V on Windows build 26100, Hyper-V Administrators") ||
		!strings.Contains(detail, "VirtualBox is running") || strings.Contains(detail, "needs an elevated PowerShell") {
		t.Errorf("detail %q, %v", detail, err)
	}
	if len(f.scripts) != 1 {
		t.Errorf("preflight took %d scripts, want 1", len(f.scripts))
	}
	f = &fakePS{t: t}
	f.on(f.patch("host/ready", map[string]any{"elevated": false, "hypervAdmin": true}), preflightMark)
	d, _, _ = testDriver(t, f)
	if detail, err := d.Preflight(context.Background()); err != nil || !strings.Contains(detail, "the first `hwk up` needs an elevated PowerShell") {
		t.Errorf("no NAT yet, not elevated: detail %q, %v", detail, err)
	}
}

func errorAs(err error, target **drivers.UnavailableError) bool {
	return errors.As(err, target)
}

// TestScriptsQuote checks that values reach PowerShell single-quoted, with
// every kind of single quote PowerShell ends a string at doubled.
func TestScriptsQuote(t *testing.T) {
	if got := quote("it's ‘x’"); got != "'it''s ‘‘x’’'" {
		t.Errorf("quote = %s", got)
	}
	s := deleteScript("a'b", `C:\Users\O'Brien\hwk`)
	if !strings.Contains(s, `-Name 'a''b'`) || !strings.Contains(s, `'C:\Users\O''Brien\hwk'`) {
		t.Errorf("script:\n%s", s)
	}
}
