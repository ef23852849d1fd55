package libvirt

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it); got:\n%s", name, got)
	}
}

var subnet = netip.MustParsePrefix("172.31.250.0/24")

func spec(name string, os config.OS, role config.Role, ip string) drivers.MachineSpec {
	return drivers.MachineSpec{
		Ref: drivers.Ref{Cluster: "demo", Name: name}, Role: role, OS: os,
		CPUs: 2, MemoryBytes: 4 << 30, DiskBytes: 20 << 30, IP: netip.MustParseAddr(ip),
		Seed: drivers.Seed{SSHAuthorizedKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHwk demo"}},
	}
}

func TestNetworkXML(t *testing.T) {
	got, err := networkXML(drivers.Network{Cluster: "demo", Subnet: subnet}, []dhcpHost{
		{"demo-cp", netip.MustParseAddr("172.31.250.10")},
		{"demo-win-1", netip.MustParseAddr("172.31.250.11")},
	})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "network.xml", got)
	var nw libvirtxml.Network
	if err := nw.Unmarshal(got); err != nil {
		t.Fatal(err)
	}
	if nw.Name != "hwk-demo" || nw.Forward.Mode != "nat" || nw.IPs[0].Address != "172.31.250.1" || nw.IPs[0].Prefix != 24 {
		t.Errorf("network %+v", nw)
	}
	if h := nw.IPs[0].DHCP.Hosts[1]; h.MAC != "52:54:00:1f:fa:0b" || h.IP != "172.31.250.11" {
		t.Errorf("DHCP host %+v", h)
	}
	if len(nw.Bridge.Name) > 15 {
		t.Errorf("bridge name %q is longer than an interface name may be", nw.Bridge.Name)
	}
}

func TestNetworkXMLErrors(t *testing.T) {
	for _, tc := range []struct {
		n     drivers.Network
		hosts []dhcpHost
		want  string
	}{
		{drivers.Network{Cluster: "demo", Subnet: netip.MustParsePrefix("fd00::/64")}, nil, "network hwk-demo: subnet fd00::/64 is not IPv4"},
		{drivers.Network{Cluster: "demo", Subnet: subnet}, []dhcpHost{{"demo-cp", netip.MustParseAddr("10.0.0.5")}}, "network hwk-demo: node demo-cp has address 10.0.0.5 outside 172.31.250.0/24"},
	} {
		if _, err := networkXML(tc.n, tc.hosts); err == nil || err.Error() != tc.want {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

func TestDomainXML(t *testing.T) {
	dir := "/home/u/.local/share/hwk/clusters/demo"
	linux := domainSpec{
		MachineSpec: spec("demo-cp", config.Linux, config.ControlPlane, "172.31.250.10"),
		Disk:        dir + "/demo-cp.qcow2", Seed: dir + "/demo-cp-seed.iso", NVRAM: dir + "/demo-cp_VARS.fd",
		Console: dir + "/logs/demo-cp-console.log",
	}
	got, err := domainXML(linux)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "domain-linux-tcg.xml", got)
	var d libvirtxml.Domain
	if err := d.Unmarshal(got); err != nil {
		t.Fatal(err)
	}
	if d.Type != "qemu" || d.CPU.Mode != "maximum" || d.Features.HyperV != nil || len(d.Devices.TPMs) != 0 {
		t.Errorf("a TCG Linux domain: type %s cpu %s hyperv %v tpm %v", d.Type, d.CPU.Mode, d.Features.HyperV, d.Devices.TPMs)
	}
	if d.Memory.Value != 4096 || d.Memory.Unit != "MiB" || d.VCPU.Value != 2 {
		t.Errorf("memory %+v vcpu %+v", d.Memory, d.VCPU)
	}
	if !strings.Contains(got, `cluster="demo"`) || !strings.Contains(got, metadataNS) {
		t.Errorf("no hwk metadata:\n%s", got)
	}

	win := domainSpec{
		MachineSpec: spec("demo-win-1", config.Windows, config.Worker, "172.31.250.11"),
		Disk:        dir + "/demo-win-1.qcow2", Seed: dir + "/demo-win-1-seed.iso", NVRAM: dir + "/demo-win-1_VARS.fd",
		Console: dir + "/logs/demo-win-1-console.log", KVM: true, TPM: true,
	}
	got, err = domainXML(win)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "domain-windows-kvm.xml", got)
	d = libvirtxml.Domain{}
	if err := d.Unmarshal(got); err != nil {
		t.Fatal(err)
	}
	if d.Type != "kvm" || d.CPU.Mode != "host-passthrough" || d.Features.HyperV == nil || d.Clock.Offset != "utc" ||
		len(d.Devices.TPMs) != 1 || d.Devices.TPMs[0].Backend.Emulator.Version != "2.0" {
		t.Errorf("a KVM Windows domain:\n%s", got)
	}

	// Under TCG, no Hyper-V enlightenments: QEMU would not start.
	win.KVM = false
	got, err = domainXML(win)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "domain-windows-tcg.xml", got)
	d = libvirtxml.Domain{}
	if err := d.Unmarshal(got); err != nil {
		t.Fatal(err)
	}
	if d.Type != "qemu" || d.Features.HyperV != nil || strings.Contains(got, "hypervclock") || d.Clock.Offset != "utc" || len(d.Devices.TPMs) != 1 {
		t.Errorf("a TCG Windows domain:\n%s", got)
	}

	bad := linux
	bad.CPUs = 0
	if _, err := domainXML(bad); err == nil || err.Error() != "node demo-cp: 0 CPUs and 4294967296 bytes of memory is no machine" {
		t.Errorf("zero CPUs: %v", err)
	}
}

func TestMAC(t *testing.T) {
	if got := MAC(netip.MustParseAddr("172.31.250.10")); got != "52:54:00:1f:fa:0a" {
		t.Errorf("MAC = %s", got)
	}
}
