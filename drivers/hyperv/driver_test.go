package hyperv

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/isoimage"
	"github.com/hwk-dev/hwk/pkg/state"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts")

// fakePS stands in for the PowerShell session: it records every script
// and answers from handlers, each matched by a marker the script holds,
// with JSON in the shapes the scripts produce or an error record.
type fakePS struct {
	t       *testing.T
	scripts []string
	answers []answer
}

type answer struct {
	marker string // a substring identifying the script
	out    any    // encoded as the script's JSON output
	err    *PSError
}

func (f *fakePS) Run(_ context.Context, script string, out any) error {
	f.scripts = append(f.scripts, script)
	for _, a := range f.answers {
		if !strings.Contains(script, a.marker) {
			continue
		}
		if a.err != nil {
			return a.err
		}
		if out == nil || a.out == nil {
			return nil
		}
		b, err := json.Marshal(a.out)
		if err != nil {
			f.t.Fatal(err)
		}
		return json.Unmarshal(b, out)
	}
	return nil
}

// on adds answers; the first whose marker matches wins.
func (f *fakePS) on(marker string, out any) *fakePS {
	f.answers = append(f.answers, answer{marker: marker, out: out})
	return f
}

func (f *fakePS) fail(marker string, err *PSError) *fakePS {
	f.answers = append(f.answers, answer{marker: marker, err: err})
	return f
}

// transcript is the scripts sent, with the test's temporary paths made
// stable, for golden files.
func (f *fakePS) transcript(root string) string {
	var b strings.Builder
	for i, s := range f.scripts {
		fmt.Fprintf(&b, "# --- script %d\n%s\n", i+1, s)
	}
	// The driver passes host paths through as they are; on Linux they
	// are slash paths under root, shown as the Windows paths they stand for.
	paths := regexp.MustCompile(regexp.QuoteMeta(root) + `[^'"\s]*`)
	return paths.ReplaceAllStringFunc(b.String(), func(p string) string {
		return `C:\hwk` + strings.ReplaceAll(strings.TrimPrefix(p, root), "/", `\`)
	})
}

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

// hostReady is a Windows 11 host with Hyper-V on, the user elevated.
var hostReady = hostFacts{Build: 26100, HypervisorPresent: true, FeatureState: 1, Module: true, VMMS: "Running", Elevated: true}

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

// netFactsFresh is a host with none of hwk's network yet.
func netFactsFresh(elevated bool) map[string]any {
	return map[string]any{
		"switch": "",
		"nat":    []any{},
		"addresses": []any{
			map[string]any{"alias": "Wi-Fi", "address": "192.168.1.23", "prefix": 24},
			map[string]any{"alias": "vEthernet (Default Switch)", "address": "172.20.96.1", "prefix": 20},
			map[string]any{"alias": "Loopback Pseudo-Interface 1", "address": "127.0.0.1", "prefix": 8},
		},
		"elevated": elevated,
	}
}

func netFactsReady() map[string]any {
	f := netFactsFresh(false)
	f["switch"] = "Internal"
	f["nat"] = []any{map[string]any{"name": "hwk", "prefix": "172.31.0.0/16"}}
	f["addresses"] = append(f["addresses"].([]any), map[string]any{"alias": "vEthernet (hwk)", "address": "172.31.250.1", "prefix": 24})
	return f
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

const createFacts = "System.IO.DriveInfo"

func freshCreate() map[string]any {
	return map[string]any{"exists": false, "vm": nil, "free": int64(200 << 30), "dns": []string{"192.168.1.1", "fe80::1"}}
}

// TestCreateLinuxAndWindows: the whole transcript of a cluster's network
// and its two nodes, a Linux control plane and a Windows worker, made on
// a fresh elevated host.
func TestCreateLinuxAndWindows(t *testing.T) {
	f := &fakePS{t: t}
	f.on("Hyper-V\\Get-VMSwitch -Name 'hwk' -ErrorAction SilentlyContinue\n[pscustomobject]", netFactsFresh(true)).
		on(createFacts, freshCreate()).
		on("Enable-VMTPM", map[string]any{"tpm": true}).
		on("-EnableSecureBoot Off", map[string]any{"tpm": false})
	d, root, warns := testDriver(t, f)
	ctx := context.Background()
	if err := d.EnsureNetwork(ctx, clusterNet); err != nil {
		t.Fatal(err)
	}
	linux := nodeSpec("demo-cp", config.Linux, config.ControlPlane, "172.31.250.10", vhdx(t, mkdir(t, root, "cache", "images", "linux")))
	win := nodeSpec("demo-win-1", config.Windows, config.Worker, "172.31.250.11", vhdx(t, mkdir(t, root, "cache", "images", "windows")))
	for _, s := range []drivers.MachineSpec{linux, win} {
		if err := d.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if len(*warns) != 0 {
		t.Errorf("warnings: %v", *warns)
	}
	// Network: facts, then switch + address + NAT in one script.
	if len(f.scripts) != 6 {
		t.Fatalf("%d scripts:\n%s", len(f.scripts), f.transcript(root))
	}
	mk := f.scripts[1]
	for _, want := range []string{
		"Hyper-V\\New-VMSwitch -Name 'hwk' -SwitchType Internal",
		"NetTCPIP\\New-NetIPAddress -InterfaceAlias 'vEthernet (hwk)' -IPAddress '172.31.250.1' -PrefixLength 24",
		"NetNat\\New-NetNat -Name 'hwk' -InternalIPInterfaceAddressPrefix '172.31.0.0/16'",
	} {
		if !strings.Contains(mk, want) {
			t.Errorf("the network script lacks %q:\n%s", want, mk)
		}
	}
	lin, wn := f.scripts[3], f.scripts[5]
	for _, c := range []struct {
		script string
		want   []string
		not    []string
	}{
		{lin, []string{"-Differencing", "-Generation 2", "-MemoryStartupBytes 4294967296", "-ProcessorCount 2 -StaticMemory", "-StaticMacAddress '00155D1FFA0A'",
			"-EnableSecureBoot Off", "Hyper-V\\Add-VMDvdDrive -VM $vm -Path", "cidata.iso", `-Path '\\.\pipe\hwk-demo-cp'`, "Hyper-V\\Start-VM -VM $vm",
			`"cluster":"demo"`, `"role":"control-plane"`, `"os":"linux"`}, []string{"MicrosoftWindows", "Enable-VMTPM"}},
		{wn, []string{"-SecureBootTemplate MicrosoftWindows", "Hyper-V\\Enable-VMTPM -VM $vm", "-MemoryStartupBytes 6442450944", "-StaticMacAddress '00155D1FFA0B'",
			`"os":"windows"`}, []string{"-EnableSecureBoot Off"}},
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
	if err != nil || st.Mode().Perm() != 0o600 {
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

// TestEnsureNetworkIdempotent: everything there, nothing made, no
// elevation needed; the second cluster's subnet is refused while the
// first holds it.
func TestEnsureNetworkIdempotent(t *testing.T) {
	f := (&fakePS{t: t}).on("[pscustomobject]@{\n    switch", netFactsReady())
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
	if err == nil || !strings.Contains(err.Error(), "overlaps hwk cluster demo's Hyper-V network") || !strings.Contains(err.Error(), "hwk down --name demo") {
		t.Errorf("a second cluster on the subnet: %v", err)
	}
}

func TestEnsureNetworkRefusals(t *testing.T) {
	for name, c := range map[string]struct {
		facts  map[string]any
		subnet string
		want   string
	}{
		"not elevated": {netFactsFresh(false), "172.31.250.0/24", "run this hwk command once from an elevated PowerShell"},
		"vpn overlap": {func() map[string]any {
			f := netFactsFresh(true)
			f["addresses"] = append(f["addresses"].([]any), map[string]any{"alias": "Corp VPN", "address": "172.31.250.77", "prefix": 24})
			return f
		}(), "172.31.250.0/24", "overlaps host interface Corp VPN (172.31.250.77/24)"},
		"docker nat": {func() map[string]any {
			f := netFactsFresh(true)
			f["nat"] = []any{map[string]any{"name": "DockerNAT", "prefix": "172.31.0.0/20"}}
			return f
		}(), "172.31.250.0/24", "overlaps the host's NAT 'DockerNAT' (172.31.0.0/20)\n  fix: set networking.nodeSubnet in the cluster config to a range nothing else uses, or remove it with `NetNat\\Remove-NetNat -Name 'DockerNAT'`"},
		"external switch": {func() map[string]any {
			f := netFactsFresh(true)
			f["switch"] = "External"
			return f
		}(), "172.31.250.0/24", "exists but is External, not Internal"},
		"outside the nat": {netFactsFresh(true), "10.99.0.0/24", "is outside 172.31.0.0/16, the range hwk's Hyper-V NAT covers"},
	} {
		t.Run(name, func(t *testing.T) {
			f := (&fakePS{t: t}).on("[pscustomobject]@{\n    switch", c.facts)
			d, _, _ := testDriver(t, f)
			err := d.EnsureNetwork(context.Background(), drivers.Network{Cluster: "demo", Subnet: netip.MustParsePrefix(c.subnet)})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			for _, s := range f.scripts {
				if strings.Contains(s, "\\New-") {
					t.Errorf("a refused network made something:\n%s", s)
				}
			}
		})
	}
}

// TestCreateRefusals: a name taken by a VM hwk did not make, a full
// drive, no DNS, no image: refused before anything is made.
func TestCreateRefusals(t *testing.T) {
	img := vhdx(t, t.TempDir())
	for name, c := range map[string]struct {
		facts map[string]any
		image string
		want  string
	}{
		"name taken": {map[string]any{"exists": true, "vm": "my own VM", "free": int64(200 << 30), "dns": []string{"1.1.1.1"}}, img,
			"demo-cp is already used by Hyper-V VM 'demo-cp', which is not part of cluster demo"},
		"disk full": {map[string]any{"exists": false, "free": int64(3 << 30), "dns": []string{"1.1.1.1"}}, img, "3 GiB free on the drive of"},
		"no dns":    {map[string]any{"exists": false, "free": int64(200 << 30), "dns": []string{}}, img, "no IPv4 DNS server"},
		"no image":  {freshCreate(), filepath.Join(t.TempDir(), "missing.vhdx"), "hwk node-image build linux --formats vhdx"},
		"qcow2 image": {freshCreate(), func() string {
			p := filepath.Join(t.TempDir(), "disk.qcow2")
			os.WriteFile(p, []byte("QFI\xfb...."), 0o644)
			return p
		}(), "is not a VHDX disk"},
	} {
		t.Run(name, func(t *testing.T) {
			f := (&fakePS{t: t}).on("[pscustomobject]@{\n    switch", netFactsReady()).on(createFacts, c.facts)
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

// TestCreateAgainReplacesItsOwn: a VM of this cluster left by a Create
// that failed half-way is removed first.
func TestCreateAgainReplacesItsOwn(t *testing.T) {
	own := metadata{Cluster: "demo", Name: "demo-cp", Role: "control-plane", OS: "linux", IP: "172.31.250.10"}.notes()
	f := (&fakePS{t: t}).on("[pscustomobject]@{\n    switch", netFactsReady()).
		on(createFacts, map[string]any{"exists": true, "vm": own, "free": int64(200 << 30), "dns": []string{"1.1.1.1"}})
	d, root, _ := testDriver(t, f)
	if err := d.EnsureNetwork(context.Background(), clusterNet); err != nil {
		t.Fatal(err)
	}
	if err := d.Create(context.Background(), nodeSpec("demo-cp", config.Linux, config.ControlPlane, "172.31.250.10", vhdx(t, t.TempDir()))); err != nil {
		t.Fatal(err)
	}
	if n := len(f.scripts); n != 4 || !strings.Contains(f.scripts[2], "Hyper-V\\Remove-VM -VM $vm -Force") || !strings.Contains(f.scripts[3], "Hyper-V\\New-VM") {
		t.Errorf("transcript:\n%s", f.transcript(root))
	}
}

// TestCreateFailsWithRecord: Hyper-V refusing the VM comes back as its
// error record, and the script removes what it made before passing it on.
func TestCreateFailsWithRecord(t *testing.T) {
	rec := &PSError{Message: "'demo-cp' failed to start. Not enough memory in the system to start the virtual machine demo-cp.",
		ID: "StartVMFailed,Microsoft.HyperV.PowerShell.Commands.StartVM", Category: "ResourceUnavailable",
		Exception: "Microsoft.HyperV.PowerShell.VirtualizationException"}
	f := (&fakePS{t: t}).on("[pscustomobject]@{\n    switch", netFactsReady()).on(createFacts, freshCreate()).
		fail("Hyper-V\\New-VM", rec)
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

func vm(name, state, notes string, ips ...string) map[string]any {
	if ips == nil {
		ips = []string{}
	}
	return map[string]any{"name": name, "state": state, "notes": notes, "ips": ips}
}

var cpNotes = metadata{Cluster: "demo", Name: "demo-cp", Role: "control-plane", OS: "linux", IP: "172.31.250.10"}.notes()

// TestLifecycle: start, stop, inspect, list and delete of a Linux and a
// Windows node, each repeated, and delete after the VM was removed by
// hand.
func TestLifecycle(t *testing.T) {
	winNotes := metadata{Cluster: "demo", Name: "demo-win-1", Role: "worker", OS: "windows", IP: "172.31.250.11"}.notes()
	for _, n := range []struct {
		name, notes, ip, golden string
		os                      config.OS
		role                    config.Role
	}{
		{"demo-cp", cpNotes, "172.31.250.10", "lifecycle-linux.ps1", config.Linux, config.ControlPlane},
		{"demo-win-1", winNotes, "172.31.250.11", "lifecycle-windows.ps1", config.Windows, config.Worker},
	} {
		t.Run(n.name, func(t *testing.T) {
			state := "Off"
			running := func() map[string]any {
				return vm(n.name, state, n.notes, n.ip, "fe80::215:5dff:fe1f:fa0a")
			}
			f := &fakePS{t: t}
			d, root, _ := testDriver(t, f)
			ref := drivers.Ref{Cluster: "demo", Name: n.name}
			ctx := context.Background()

			f.answers = []answer{{marker: "$vm = Hyper-V\\Get-VM -Name '" + n.name + "' -ErrorAction SilentlyContinue\nif ($vm) {", out: running()}}
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
			state = "Saved"
			f.answers[0].out = running()
			if m, _ := d.Inspect(ctx, ref); m.State != drivers.StateOther || m.Detail != "saved" {
				t.Errorf("a saved VM: %+v", m)
			}
			// Another cluster's machine of the same name is not this one's.
			if m, _ := d.Inspect(ctx, drivers.Ref{Cluster: "other", Name: n.name}); m.State != drivers.StateMissing {
				t.Errorf("another cluster's VM: %+v", m)
			}
			f.answers = append([]answer{{marker: "@(Hyper-V\\Get-VM | Where-Object", out: []any{
				vm("demo-cp", "Running", cpNotes, "172.31.250.10"),
				vm("demo-win-1", "Off", winNotes),
				vm("x-cp", "Running", metadata{Cluster: "x", Name: "x-cp", Role: "control-plane", OS: "linux", IP: "172.31.251.10"}.notes()),
			}}}, f.answers...)
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
			f.answers = nil
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

// TestDeleteLeavesOthersVMs: a VM of the node's name that hwk did not
// make for this cluster is not removed.
func TestDeleteLeavesOthersVMs(t *testing.T) {
	f := (&fakePS{t: t}).on("if ($vm) {", vm("demo-cp", "Running", "my VM"))
	d, _, _ := testDriver(t, f)
	if err := d.Delete(context.Background(), drivers.Ref{Cluster: "demo", Name: "demo-cp"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(f.scripts[1], "Remove-VM") {
		t.Errorf("deleted a VM hwk did not make:\n%s", f.scripts[1])
	}
}

// TestDeleteNetwork: the cluster's gateway goes; the switch and NAT go
// when no hwk VM is on the switch; without elevation the NAT stays, with
// a warning.
func TestDeleteNetwork(t *testing.T) {
	f := (&fakePS{t: t}).on("[pscustomobject]@{\n    switch", netFactsReady()).on("$kept = @()", map[string]any{"kept": []string{"nat"}})
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

// TestNodeConfirmsKVPAddress: a node's handle needs the guest to report
// its static address through KVP, or, for a Linux guest without a KVP
// daemon, to report none.
func TestNodeConfirmsKVPAddress(t *testing.T) {
	win := metadata{Cluster: "demo", Name: "demo-win-1", Role: "worker", OS: "windows", IP: "172.31.250.11"}.notes()
	for name, c := range map[string]struct {
		vm   map[string]any
		want string
	}{
		"windows booting": {vm("demo-win-1", "Running", win), "has not reported an address through Hyper-V's data exchange (KVP) yet"},
		"wrong ip":        {vm("demo-cp", "Running", cpNotes, "169.254.3.4", "fe80::1"), "reports 169.254.3.4, not its static 172.31.250.10"},
		"windows wrong":   {vm("demo-win-1", "Running", win, "172.31.250.99"), "reports 172.31.250.99, not its static 172.31.250.11"},
		"off":             {vm("demo-cp", "Off", cpNotes), "is off, not running; start it with `hwk up` or `Start-VM -Name 'demo-cp'`"},
		// The address is confirmed: what fails is the missing SSH key,
		// which Create would have made.
		"ready":         {vm("demo-cp", "Running", cpNotes, "172.31.250.10"), "SSH key"},
		"windows ready": {vm("demo-win-1", "Running", win, "fe80::2", "172.31.250.11"), "SSH key"},
		"linux, no kvp": {vm("demo-cp", "Running", cpNotes), "SSH key"},
	} {
		t.Run(name, func(t *testing.T) {
			f := (&fakePS{t: t}).on("if ($vm) {", c.vm)
			d, _, _ := testDriver(t, f)
			ref := drivers.Ref{Cluster: "demo", Name: c.vm["name"].(string)}
			if _, err := d.Node(context.Background(), ref); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// TestPreflight: each way a host falls short, with its fix.
func TestPreflight(t *testing.T) {
	with := func(change func(*hostFacts)) hostFacts {
		f := hostReady
		change(&f)
		return f
	}
	for name, c := range map[string]struct {
		facts hostFacts
		want  string
	}{
		"hyper-v off":        {with(func(f *hostFacts) { f.Module, f.FeatureState = false, 2 }), "Enable-WindowsOptionalFeature -Online -FeatureName Microsoft-Hyper-V -All"},
		"reboot pending":     {with(func(f *hostFacts) { f.RebootPending = true }), "restart Windows, then run hwk again"},
		"no hypervisor":      {with(func(f *hostFacts) { f.HypervisorPresent = false }), "bcdedit /set hypervisorlaunchtype auto"},
		"vmms stopped":       {with(func(f *hostFacts) { f.VMMS = "Stopped" }), "(vmms) is stopped\n  fix: in an elevated PowerShell: `Start-Service vmms`"},
		"not allowed":        {with(func(f *hostFacts) { f.Elevated = false }), "Add-LocalGroupMember -SID 'S-1-5-32-578' -Member $env:USERNAME"},
		"overlapping nat":    {with(func(f *hostFacts) { f.NATs = []natInfo{{Name: "WSLNat", Prefix: "172.31.240.0/20"}} }), "NetNat\\Remove-NetNat -Name 'WSLNat'"},
		"unrelated nat fine": {with(func(f *hostFacts) { f.NATs = []natInfo{{Name: "DockerNAT", Prefix: "10.0.75.0/24"}} }), ""},
	} {
		t.Run(name, func(t *testing.T) {
			f := (&fakePS{t: t}).on("Win32_ComputerSystem", c.facts)
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

	f := (&fakePS{t: t}).on("Win32_ComputerSystem", with(func(f *hostFacts) { f.Elevated, f.HypervAdmin, f.VirtualBox = false, true, true }))
	d, _, _ := testDriver(t, f)
	detail, err := d.Preflight(context.Background())
	if err != nil || !strings.Contains(detail, "Hyper-V on Windows build 26100, Hyper-V Administrators") ||
		!strings.Contains(detail, "VirtualBox is running") || !strings.Contains(detail, "the first `hwk up` needs an elevated PowerShell") {
		t.Errorf("detail %q, %v", detail, err)
	}
	if len(f.scripts) != 1 {
		t.Errorf("preflight took %d scripts, want 1", len(f.scripts))
	}
}

func errorAs(err error, target **drivers.UnavailableError) bool {
	return errors.As(err, target)
}

// TestScriptsQuote: values reach PowerShell single-quoted, with every
// kind of single quote PowerShell ends a string at doubled.
func TestScriptsQuote(t *testing.T) {
	if got := quote("it's ‘x’"); got != "'it''s ‘‘x’’'" {
		t.Errorf("quote = %s", got)
	}
	s := deleteScript("a'b", `C:\Users\O'Brien\hwk`)
	if !strings.Contains(s, `-Name 'a''b'`) || !strings.Contains(s, `'C:\Users\O''Brien\hwk'`) {
		t.Errorf("script:\n%s", s)
	}
}

// TestCmdletsQualified: every Hyper-V, NetNat and NetTCPIP cmdlet the
// driver sends names its module.
func TestCmdletsQualified(t *testing.T) {
	bare := regexp.MustCompile(`(^|[^\\\w-])((Get|New|Set|Remove|Start|Stop|Add|Enable)-(VM\w*|NetNat|NetIPAddress|NetRoute))\b`)
	for name, s := range allScripts() {
		if m := bare.FindStringSubmatch(s); m != nil {
			t.Errorf("%s calls %s without its module", name, m[2])
		}
	}
}
