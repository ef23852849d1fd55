package doctor

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/hyperv"
	"github.com/hwk-dev/hwk/internal/drivers/libvirt"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// healthy returns a host where every probe is happy: 32 GiB, 200 GiB free, a
// Linux-mode engine in step, nothing on Kubernetes' ports.
func healthy(os string) Probes {
	return Probes{
		OS: os,
		Virtualization: func(context.Context) (Virtualization, error) {
			return Virtualization{Enabled: true, Detail: "on"}, nil
		},
		Memory:   func(context.Context) (uint64, uint64, error) { return 32 << 30, 24 << 30, nil },
		DiskFree: func(string) (uint64, error) { return 200 << 30, nil },
		Engine: func(context.Context) (*Engine, error) {
			return &Engine{Version: "28.0.1", OSType: "linux", Time: now.Add(2 * time.Second)}, nil
		},
		VirtualBox: func() string { return "" },
		Listening:  func(int) bool { return false },
		Now:        func() time.Time { return now },
	}
}

func cluster(t *testing.T, driver string, windows int) *config.Cluster {
	t.Helper()
	c, err := config.Resolve("", config.Overrides{Driver: driver, WindowsWorkers: &windows}, config.Host{OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// nodeDrivers gives every node the driver its config names, from ds.
func nodeDrivers(ds ...drivers.Driver) func(config.Node) (drivers.Driver, error) {
	r := drivers.NewRegistry(ds...)
	return func(n config.Node) (drivers.Driver, error) { return r.Get(n.Driver) }
}

// avail returns a Drivers that finds as.
func avail(as ...drivers.Availability) func(context.Context) []drivers.Availability {
	return func(context.Context) []drivers.Availability { return as }
}

func find(t *testing.T, cs []Check, name string) Check {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, cs)
	return Check{}
}

func TestHealthyHosts(t *testing.T) {
	for _, os := range []string{"linux", "windows", "darwin"} {
		in := Input{Probes: healthy(os), Cluster: cluster(t, config.DriverDocker, 0), DataDir: "/data", Subnet: netip.MustParsePrefix("172.31.250.0/24"), Images: []string{"linux v1.35.4"},
			Drivers: avail(drivers.Availability{Name: "docker", Available: true, Detail: "Docker Engine 28.0.1"})}
		cs := Run(context.Background(), in, nil)
		for _, c := range cs {
			if c.Status != OK {
				t.Errorf("%s: %s is %s: %s", os, c.Name, c.Status, c.Detail)
			}
		}
		if _, hasVBox := func() (Check, bool) {
			for _, c := range cs {
				if c.Name == "hypervisors" {
					return c, true
				}
			}
			return Check{}, false
		}(); hasVBox != (os == "windows") {
			t.Errorf("%s: the hypervisors check is there: %v", os, hasVBox)
		}
		if Failed(cs) {
			t.Errorf("%s: a healthy host failed", os)
		}
	}
}

// TestLinuxProblems checks the report of a Linux host with virtualization
// off (a failure for VM nodes, only a warning for an all-container
// cluster), the cluster's driver down, too little memory and disk, a
// skewed engine clock, no free subnet, and another Kubernetes on 6443.
func TestLinuxProblems(t *testing.T) {
	p := healthy("linux")
	p.Virtualization = func(context.Context) (Virtualization, error) {
		return Virtualization{Detail: "the CPU shows neither vmx nor svm"}, nil
	}
	p.Memory = func(context.Context) (uint64, uint64, error) { return 8 << 30, 3 << 30, nil }
	p.DiskFree = func(string) (uint64, error) { return 4 << 30, nil }
	p.Engine = func(context.Context) (*Engine, error) {
		return &Engine{Version: "20.10", OSType: "linux", Time: now.Add(-3 * time.Minute)}, nil
	}
	p.Listening = func(port int) bool { return port == 6443 }
	in := Input{Probes: p, Cluster: cluster(t, config.DriverLibvirt, 1), DataDir: "/data", Images: []string{"linux v1.35.4"}, WindowsImageHelp: "build one",
		NodeDriver: nodeDrivers(libvirt.New(libvirt.Options{})),
		Drivers:    avail(drivers.Availability{Name: "libvirt", Detail: "no libvirt socket", Fix: "sudo apt-get install libvirt-daemon-system"}, drivers.Availability{Name: "docker", Detail: "not running", Fix: "start it"}),
		SubnetErr:  errors.New("no /24 in 172.31.0.0/16 is free for the node network\n  fix: set networking.nodeSubnet")}
	cs := Run(context.Background(), in, nil)
	want := map[string]struct {
		status Status
		fix    string
	}{
		"virtualization": {Fail, "modprobe kvm_intel"},
		"driver libvirt": {Fail, "apt-get install libvirt-daemon-system"},
		"driver docker":  {Skip, "start it"},
		"memory":         {Fail, "nodes[].memory"},
		"disk":           {Fail, "free at least 6.0 GiB"},
		"docker engine":  {Fail, "timedatectl set-ntp true"},
		"node images":    {Fail, "hwk up --windows-workers 0"},
		"node subnet":    {Fail, "set networking.nodeSubnet"},
		"ports":          {Warn, "kubectl --context hwk-NAME"},
	}
	for name, w := range want {
		c := find(t, cs, name)
		if c.Status != w.status || !strings.Contains(c.Fix, w.fix) {
			t.Errorf("%s: %s %q (fix %q), want %s with %q", name, c.Status, c.Detail, c.Fix, w.status, w.fix)
		}
	}
	if c := find(t, cs, "memory"); !strings.Contains(c.Detail, "asks 10.0 GiB for its 2 nodes, and its VMs take 10.0 GiB to start (hwk-cp 4.0 GiB, hwk-win-1 6.0 GiB)") {
		t.Errorf("memory: %q", c.Detail)
	}
	if c := find(t, cs, "docker engine"); !strings.Contains(c.Detail, "3m0s off") {
		t.Errorf("engine clock: %q", c.Detail)
	}

	// /dev/kvm is there but the VM driver emulates: a warning, not "ok".
	kvm := in
	kvm.Probes.Virtualization = func(context.Context) (Virtualization, error) {
		return Virtualization{Enabled: true, Detail: "KVM: /dev/kvm"}, nil
	}
	kvm.Drivers = avail(drivers.Availability{Name: "libvirt", Available: true, Emulated: true, Detail: "TCG"})
	if c := find(t, Run(context.Background(), kvm, nil), "virtualization"); c.Status != Warn || !strings.Contains(c.Detail, "libvirt driver cannot use it") {
		t.Errorf("KVM that QEMU cannot use: %+v", c)
	}
	// ...which a cluster of containers does not mind.
	kvm.Cluster = cluster(t, config.DriverDocker, 0)
	if c := find(t, Run(context.Background(), kvm, nil), "virtualization"); c.Status != OK {
		t.Errorf("KVM that QEMU cannot use, docker cluster: %+v", c)
	}

	// An all-container cluster does not need virtualization.
	in.Cluster = cluster(t, config.DriverDocker, 0)
	if c := find(t, Run(context.Background(), in, nil), "virtualization"); c.Status != Warn {
		t.Errorf("no virtualization for a docker cluster: %s", c.Status)
	}
}

// TestWindowsProblems checks the report of VirtualBox beside a running
// Windows hypervisor, Docker Desktop in Windows containers mode, firmware
// virtualization off, and the reading of the host's facts as PowerShell
// prints them.
func TestWindowsProblems(t *testing.T) {
	p := healthy("windows")
	p.VirtualBox = func() string { return `C:\Program Files\Oracle\VirtualBox\` }
	p.Virtualization = func(context.Context) (Virtualization, error) {
		return (&hostFacts{Hypervisor: true}).virtualization(), nil
	}
	p.Engine = func(context.Context) (*Engine, error) {
		return &Engine{Version: "28.0.1", OSType: "windows", Time: now}, nil
	}
	in := Input{Probes: p, Cluster: cluster(t, config.DriverDocker, 0), DataDir: `C:\Users\me\AppData\Local\hwk`, Subnet: netip.MustParsePrefix("172.31.251.0/24")}
	cs := Run(context.Background(), in, nil)
	if c := find(t, cs, "hypervisors"); c.Status != Warn || !strings.Contains(c.Fix, "bcdedit /set hypervisorlaunchtype off") {
		t.Errorf("VirtualBox beside Hyper-V: %+v", c)
	}
	if c := find(t, cs, "docker engine"); c.Status != Fail || !strings.Contains(c.Fix, "Switch to Linux containers") {
		t.Errorf("Windows containers mode: %+v", c)
	}
	if c := find(t, cs, "virtualization"); c.Status != OK {
		t.Errorf("with the hypervisor on, virtualization is on: %+v", c)
	}

	in.Probes.Virtualization = func(context.Context) (Virtualization, error) {
		return (&hostFacts{Extensions: true}).virtualization(), nil
	}
	in.Cluster = cluster(t, config.DriverHyperV, 1)
	if c := find(t, Run(context.Background(), in, nil), "virtualization"); c.Status != Fail || !strings.Contains(c.Fix, "firmware (UEFI/BIOS)") {
		t.Errorf("firmware off: %+v", c)
	}

	// With both images cached a Windows worker has what it needs; with
	// only the Windows one, up pulls the Linux one.
	in.Images = []string{"windows v1.35.4", "linux v1.35.4"}
	if c := find(t, Run(context.Background(), in, nil), "node images"); c.Status != OK || c.Detail != "a linux node image is cached; a windows node image is cached" {
		t.Errorf("both images: %+v", c)
	}
	in.Images = []string{"windows v1.35.4"}
	if c := find(t, Run(context.Background(), in, nil), "node images"); c.Status != OK || !strings.Contains(c.Detail, "up pulls the one this hwk build pins") {
		t.Errorf("no Linux image: %+v", c)
	}
	in.NoLinuxPull = errors.New("this hwk build pins no published node image for Kubernetes v1.35.4")
	if c := find(t, Run(context.Background(), in, nil), "node images"); c.Status != Fail || !strings.Contains(c.Fix, "hwk node-image load -i FILE") {
		t.Errorf("no Linux image and none to pull: %+v", c)
	}

	// What hostFactsScript prints: ConvertTo-Json -Compress of the
	// object, one line, possibly after a BOM.
	f, err := parseHostFacts([]byte("\ufeff{\"firmware\":false,\"extensions\":true,\"hypervisor\":true}\r\n"))
	if err != nil || !f.Hypervisor || f.Firmware || !f.Extensions {
		t.Errorf("parse: %+v %v", f, err)
	}
	if _, err := parseHostFacts([]byte("Get-CimInstance : Access denied")); err == nil || !strings.Contains(err.Error(), "Access denied") {
		t.Errorf("a PowerShell error: %v", err)
	}
}

// TestDarwinProblems checks the report of a Mac without
// Hypervisor.framework, and without an engine while the cluster needs one.
func TestDarwinProblems(t *testing.T) {
	p := healthy("darwin")
	p.Virtualization = func(context.Context) (Virtualization, error) {
		return Virtualization{Detail: "kern.hv_support is 0"}, nil
	}
	p.Engine = func(context.Context) (*Engine, error) { return nil, errors.New("Cannot connect to the Docker daemon") }
	in := Input{Probes: p, Cluster: cluster(t, config.DriverDocker, 0), DataDir: "/Users/me/.local/share/hwk"}
	cs := Run(context.Background(), in, nil)
	if c := find(t, cs, "docker engine"); c.Status != Fail || !strings.Contains(c.Fix, "start Docker") {
		t.Errorf("no engine: %+v", c)
	}
	if c := find(t, cs, "virtualization"); c.Status != Warn || !strings.Contains(c.Detail, "kern.hv_support is 0") {
		t.Errorf("no hv_support for a docker cluster: %+v", c)
	}
	if c := find(t, cs, "node subnet"); c.Status != Skip {
		t.Errorf("subnet with nothing found: %+v", c)
	}
}

// TestSlowProbes checks that a probe that does not answer, whether it
// heeds its context or not, becomes a warning naming the probe and how
// long, that the note function hears what is pending after a second, and
// that every check reaches emit, in the report's order, as it is made.
func TestSlowProbes(t *testing.T) {
	old := probeLimit
	probeLimit = 1500 * time.Millisecond
	defer func() { probeLimit = old }()
	release := make(chan struct{})
	defer close(release)
	p := healthy("linux")
	p.Memory = func(ctx context.Context) (uint64, uint64, error) {
		ui.Waiting(ctx, "free(1)")
		<-ctx.Done()
		return 0, 0, ctx.Err()
	}
	p.Engine = func(context.Context) (*Engine, error) {
		<-release
		return nil, errors.New("late")
	}
	var notes []string
	var mu sync.Mutex
	ctx := ui.WithNotes(context.Background(), func(s string) {
		mu.Lock()
		notes = append(notes, s)
		mu.Unlock()
	})
	in := Input{Probes: p, Cluster: cluster(t, config.DriverDocker, 0), DataDir: "/data", Subnet: netip.MustParsePrefix("172.31.250.0/24"),
		Drivers: avail(drivers.Availability{Name: "docker", Available: true, Detail: "Docker Engine 28.0.1"})}
	var emitted []string
	cs := Run(ctx, in, func(c Check) { emitted = append(emitted, c.Name) })
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	if strings.Join(emitted, ",") != strings.Join(names, ",") || emitted[0] != "cluster" {
		t.Errorf("emitted %q, returned %q", emitted, names)
	}
	if c := find(t, cs, "memory"); c.Status != Warn || c.Detail != "could not read the host's memory: no answer from the host's memory figures in 1.5s" {
		t.Errorf("memory: %+v", c)
	}
	if c := find(t, cs, "docker engine"); c.Status != Fail || !strings.Contains(c.Detail, "no answer from the Docker engine in 1.5s") {
		t.Errorf("docker engine: %+v", c)
	}
	mu.Lock()
	defer mu.Unlock()
	got := strings.Join(notes, "\n")
	if !strings.Contains(got, "waiting 1s for the host's memory figures (free(1)) (at most 1.5s)") || !strings.Contains(got, "waiting 1s for the Docker engine (at most 1.5s)") {
		t.Errorf("notes:\n%s", got)
	}
}

// TestMemoryOnHyperV checks that doctor judges memory as up does, by what
// the VMs take when they start: Hyper-V's Dynamic Memory starts the
// default cluster with 5 GiB, which a 16 GB laptop with 7 GiB free has (a
// warning: the nodes may grow to 10 GiB) and one with 4 GiB free has not.
func TestMemoryOnHyperV(t *testing.T) {
	for _, c := range []struct {
		avail  uint64
		status Status
	}{{12 << 30, OK}, {7 << 30, Warn}, {4 << 30, Fail}} {
		p := healthy("windows")
		p.Memory = func(context.Context) (uint64, uint64, error) { return 16 << 30, c.avail, nil }
		in := Input{Probes: p, Cluster: cluster(t, config.DriverHyperV, 1), NodeDriver: nodeDrivers(hyperv.New(hyperv.Options{})), DataDir: "/data"}
		got := find(t, Run(context.Background(), in, nil), "memory")
		if got.Status != c.status || !strings.Contains(got.Detail, "its VMs take 5.0 GiB to start (hwk-cp 2.0 GiB, hwk-win-1 3.0 GiB)") {
			t.Errorf("%s free: %+v, want %s", drivers.GiB(c.avail), got, c.status)
		}
	}
}
