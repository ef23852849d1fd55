package libvirt

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

const procRoutes = `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	00000000	010200C0	0003	0	0	0	00000000	0	0	0
docker0	000011AC	00000000	0001	0	0	0	0000FFFF	0	0	0
eth0	000200C0	00000000	0001	0	0	0	00FFFFFF	0	0	0
`

func TestParseRoutes(t *testing.T) {
	rs, err := parseRoutes(strings.NewReader(procRoutes))
	if err != nil {
		t.Fatal(err)
	}
	want := []route{
		{"eth0", netip.MustParsePrefix("0.0.0.0/0")},
		{"docker0", netip.MustParsePrefix("172.17.0.0/16")},
		{"eth0", netip.MustParsePrefix("192.0.2.0/24")},
	}
	if len(rs) != len(want) {
		t.Fatalf("got %v", rs)
	}
	for i := range want {
		if rs[i] != want[i] {
			t.Errorf("route %d: %v, want %v", i, rs[i], want[i])
		}
	}
	if _, err := parseRoutes(strings.NewReader("head\neth0 XYZ 0 0 0 0 0 00FFFFFF\n")); err == nil {
		t.Error("a bad destination was accepted")
	}
}

func TestRouteConflict(t *testing.T) {
	rs, _ := parseRoutes(strings.NewReader(procRoutes))
	for _, tc := range []struct {
		subnet, bridge, want string
	}{
		{"172.31.250.0/24", "", ""},
		{"172.17.5.0/24", "", "subnet 172.17.5.0/24 overlaps the host's route to 172.17.0.0/16 on docker0\n  fix: set networking.nodeSubnet in the cluster config to a range nothing else uses"},
		{"192.0.2.0/25", "", "subnet 192.0.2.0/25 overlaps the host's route to 192.0.2.0/24 on eth0\n  fix: set networking.nodeSubnet in the cluster config to a range nothing else uses"},
		// The cluster's own bridge is no conflict.
		{"172.17.0.0/16", "docker0", ""},
	} {
		c := routeConflict(rs, netip.MustParsePrefix(tc.subnet), tc.bridge)
		got := ""
		if c != nil {
			got = c.Error()
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.subnet, got, tc.want)
		}
	}
}

func TestNetworkPrefixes(t *testing.T) {
	for raw, want := range map[string]string{
		`<network><ip address="192.168.122.1" netmask="255.255.255.0"/></network>`:                                 "[192.168.122.0/24]",
		`<network><ip address="10.1.2.1" prefix="16"/><ip family="ipv6" address="fd00::1" prefix="64"/></network>`: "[10.1.0.0/16]",
		`<network><ip address="10.9.9.1"/></network>`:                                                              "[10.9.9.0/24]",
		`not xml`: "[]",
	} {
		if got := fmtPrefixes(networkPrefixes(raw)); got != want {
			t.Errorf("%s: %s, want %s", raw, got, want)
		}
	}
}

func fmtPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

// fakeQCOW2 writes a qcow2 header claiming size bytes.
func fakeQCOW2(t *testing.T, size uint64) string {
	t.Helper()
	h := make([]byte, 512)
	copy(h, "QFI\xfb")
	binary.BigEndian.PutUint64(h[24:], size)
	p := filepath.Join(t.TempDir(), "node", "disk.qcow2")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, h, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestImageChecks(t *testing.T) {
	d := New(Options{})
	img := fakeQCOW2(t, 20<<30)
	if n, err := qcow2Size(img); err != nil || n != 20<<30 {
		t.Errorf("qcow2Size: %d, %v", n, err)
	}
	if err := d.CheckImage(context.Background(), img); err != nil {
		t.Error(err)
	}
	missing := filepath.Join(t.TempDir(), "disk.qcow2")
	err := d.CheckImage(context.Background(), missing)
	var im *drivers.ImageMissingError
	if !errors.As(err, &im) || err.Error() != "node image "+missing+" is not in libvirt\n  fix: build it with `hwk node-image build linux --formats qcow2`" {
		t.Errorf("missing image: %v", err)
	}
	raw := filepath.Join(t.TempDir(), "disk.raw")
	os.WriteFile(raw, make([]byte, 4096), 0o644)
	if err := d.CheckImage(context.Background(), raw); err == nil || err.Error() != "node image "+raw+" is not a qcow2 disk; the libvirt driver boots the qcow2 format (`hwk node-image build linux --formats qcow2`)" {
		t.Errorf("raw image: %v", err)
	}
}

func TestBaseNameFollowsTheBuild(t *testing.T) {
	img := fakeQCOW2(t, 1<<30)
	fi, _ := os.Stat(img)
	a := baseName(img, fi)
	if !strings.HasPrefix(a, "base_node_") || !strings.HasSuffix(a, ".qcow2") || a != baseName(img, fi) {
		t.Errorf("base name %q", a)
	}
	later := time.Now().Add(time.Hour)
	os.Chtimes(img, later, later)
	fi2, _ := os.Stat(img)
	if baseName(img, fi2) == a {
		t.Error("a rebuilt image (new mtime) would reuse the old base volume")
	}
}

func TestCreateRefusesBadSpecs(t *testing.T) {
	d := New(Options{Sockets: []string{filepath.Join(t.TempDir(), "none")}})
	good := spec("demo-cp", config.Linux, config.ControlPlane, "172.31.250.10")
	good.Image = fakeQCOW2(t, 1<<30)
	for _, tc := range []struct {
		edit func(*drivers.MachineSpec)
		want string
	}{
		{func(s *drivers.MachineSpec) { s.OS = "plan9" }, `node demo-cp: the libvirt driver cannot run "plan9" nodes`},
		{func(s *drivers.MachineSpec) { s.IP = netip.MustParseAddr("fd00::10") }, `node demo-cp: libvirt nodes need an IPv4 address, not "fd00::10"`},
		{func(s *drivers.MachineSpec) { s.Image = "" }, "node demo-cp: no node image (a qcow2 disk) given"},
		{func(s *drivers.MachineSpec) { s.MemoryBytes = 128 << 20 }, "node demo-cp: 2 CPUs and 128 MiB of memory is too little for a node"},
		{func(s *drivers.MachineSpec) { s.CPUs = 0 }, "node demo-cp: 0 CPUs and 4096 MiB of memory is too little for a node"},
	} {
		s := good
		tc.edit(&s)
		if err := d.Create(context.Background(), s); err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	// A good spec gets as far as the daemon, which is not there.
	var ue *drivers.UnavailableError
	if err := d.Create(context.Background(), good); !errors.As(err, &ue) {
		t.Errorf("without libvirt: %v", err)
	}
}

// testDriver returns a Driver on libvirtd's test:///default, whose state lives
// as long as some connection to it is open: the test holds l.
func testDriver(t *testing.T, routes string) (*Driver, *golibvirt.Libvirt) {
	t.Helper()
	l := daemon(t, golibvirt.TestDefault)
	d := New(Options{URI: golibvirt.TestDefault, Sockets: systemSockets, Dirs: state.Dirs{Data: t.TempDir(), Cache: t.TempDir()}})
	d.routes = func() ([]route, error) { return parseRoutes(strings.NewReader(routes)) }
	return d, l
}

func TestEnsureNetworkRefusesOverlaps(t *testing.T) {
	d, l := testDriver(t, procRoutes)
	ctx := context.Background()
	t.Cleanup(func() { _ = removeNetwork(l, "hwk-ovl") })
	for _, tc := range []struct{ subnet, want string }{
		{"172.17.0.0/24", "subnet 172.17.0.0/24 overlaps the host's route to 172.17.0.0/16 on docker0\n  fix: set networking.nodeSubnet in the cluster config to a range nothing else uses"},
		// test:///default has a network "default" on 192.168.122.0/24.
		// Not hwk's network, so no advice to remove it.
		{"192.168.122.0/24", `subnet 192.168.122.0/24 overlaps libvirt network "default" (192.168.122.0/24)` +
			"\n  fix: set networking.nodeSubnet in the cluster config to a range nothing else uses"},
		{"fd00::/64", "network hwk-ovl: subnet fd00::/64 must be IPv4 with room for nodes (/29 or larger)"},
		{"172.31.250.0/30", "network hwk-ovl: subnet 172.31.250.0/30 must be IPv4 with room for nodes (/29 or larger)"},
	} {
		err := d.EnsureNetwork(ctx, drivers.Network{Cluster: "ovl", Subnet: netip.MustParsePrefix(tc.subnet)})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.subnet, err, tc.want)
		}
		var se *drivers.SubnetInUseError
		if errors.As(err, &se) {
			if cerr := d.CheckSubnet(ctx, drivers.Network{Cluster: "ovl", Subnet: netip.MustParsePrefix(tc.subnet)}); cerr == nil || cerr.Error() != tc.want {
				t.Errorf("CheckSubnet %s: %v\nwant %s", tc.subnet, cerr, tc.want)
			}
		}
		if _, err := l.NetworkLookupByName("hwk-ovl"); !isCode(err, golibvirt.ErrNoNetwork) {
			t.Fatalf("%s: a refused network was made (%v)", tc.subnet, err)
		}
	}
	n := drivers.Network{Cluster: "ovl", Subnet: netip.MustParsePrefix("172.31.250.0/24")}
	for range 2 {
		if err := d.EnsureNetwork(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.CheckSubnet(ctx, n); err != nil {
		t.Errorf("the cluster's own network counts as a conflict: %v", err)
	}
	if err := d.CheckSubnet(ctx, drivers.Network{Cluster: "ovl2", Subnet: netip.MustParsePrefix("172.31.250.128/25")}); err == nil ||
		err.Error() != `subnet 172.31.250.128/25 overlaps libvirt network "hwk-ovl" (172.31.250.0/24)`+"\n  fix: set networking.nodeSubnet in the cluster config to a range nothing else uses" {
		t.Errorf("another cluster over ovl's subnet: %v", err)
	}
	n.Subnet = netip.MustParsePrefix("172.31.251.0/24")
	want := "libvirt network hwk-ovl is there with subnet [172.31.250.0/24], not the cluster's 172.31.251.0/24\n  fix: remove the cluster with `hwk down --name ovl`, or the network with `virsh -c qemu:///system net-destroy hwk-ovl; virsh -c qemu:///system net-undefine hwk-ovl`"
	if err := d.EnsureNetwork(ctx, n); err == nil || err.Error() != want {
		t.Errorf("other subnet: %v", err)
	}
	for range 2 {
		if err := d.DeleteNetwork(ctx, "ovl"); err != nil {
			t.Fatal(err)
		}
	}
}

// dhcpHosts lists a network's reservations as name=mac=ip.
func dhcpHosts(t *testing.T, l *golibvirt.Libvirt, name string) string {
	t.Helper()
	nw, err := l.NetworkLookupByName(name)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := l.NetworkGetXMLDesc(nw, 0)
	if err != nil {
		t.Fatal(err)
	}
	var def libvirtxml.Network
	if err := def.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ip := range def.IPs {
		if ip.DHCP != nil {
			for _, h := range ip.DHCP.Hosts {
				out = append(out, h.Name+"="+h.MAC+"="+h.IP)
			}
		}
	}
	return strings.Join(out, " ")
}

func TestDHCPReservations(t *testing.T) {
	d, l := testDriver(t, procRoutes)
	ctx := context.Background()
	t.Cleanup(func() { _ = removeNetwork(l, "hwk-dhcp") })
	if err := d.EnsureNetwork(ctx, drivers.Network{Cluster: "dhcp", Subnet: subnet}); err != nil {
		t.Fatal(err)
	}
	cp := dhcpHost{Name: "dhcp-cp", IP: netip.MustParseAddr("172.31.250.10")}
	w := dhcpHost{Name: "dhcp-w", IP: netip.MustParseAddr("172.31.250.11")}
	steps := []struct {
		h    dhcpHost
		add  bool
		want string
	}{
		{cp, true, "dhcp-cp=52:54:00:1f:fa:0a=172.31.250.10"},
		{cp, true, "dhcp-cp=52:54:00:1f:fa:0a=172.31.250.10"},
		{w, true, "dhcp-cp=52:54:00:1f:fa:0a=172.31.250.10 dhcp-w=52:54:00:1f:fa:0b=172.31.250.11"},
		// The same node at another address replaces its reservation.
		{dhcpHost{Name: "dhcp-w", IP: netip.MustParseAddr("172.31.250.12")}, true, "dhcp-cp=52:54:00:1f:fa:0a=172.31.250.10 dhcp-w=52:54:00:1f:fa:0c=172.31.250.12"},
		{dhcpHost{Name: "dhcp-w"}, false, "dhcp-cp=52:54:00:1f:fa:0a=172.31.250.10"},
		{dhcpHost{Name: "dhcp-w"}, false, "dhcp-cp=52:54:00:1f:fa:0a=172.31.250.10"},
		{dhcpHost{Name: "dhcp-cp"}, false, ""},
	}
	for i, s := range steps {
		if err := setDHCPHost(l, "hwk-dhcp", s.h, s.add); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := dhcpHosts(t, l, "hwk-dhcp"); got != s.want {
			t.Errorf("step %d: %q, want %q", i, got, s.want)
		}
	}
	// No network: removing is a no-op, adding an error.
	if err := setDHCPHost(l, "hwk-none", cp, false); err != nil {
		t.Error(err)
	}
	if err := setDHCPHost(l, "hwk-none", cp, true); err == nil || !strings.Contains(err.Error(), "look up network hwk-none") {
		t.Errorf("adding on a missing network: %v", err)
	}
}

// TestMachinesOnTestDriver checks that the driver finds its own domains by
// their metadata, leaves others alone, and starts, stops and deletes its
// own.
func TestMachinesOnTestDriver(t *testing.T) {
	d, l := testDriver(t, procRoutes)
	ctx := context.Background()
	ref := drivers.Ref{Cluster: "api", Name: "api-cp"}
	s := domainSpec{MachineSpec: spec("api-cp", config.Linux, config.ControlPlane, "172.31.250.10"), Disk: "/x/a.qcow2", Seed: "/x/a.iso", NVRAM: "/x/a_VARS.fd", Console: "/x/a.log"}
	s.Cluster = "api"
	x, err := domainXML(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.DomainDefineXMLFlags(x, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeDomain(l, "api-cp") })

	if m, err := d.Inspect(ctx, ref); err != nil || m.State != drivers.StateStopped || m.IP.String() != "172.31.250.10" || m.Role != config.ControlPlane || m.OS != config.Linux {
		t.Errorf("inspect: %+v (%v)", m, err)
	}
	// The test driver's own domain "test" has no hwk metadata.
	if m, err := d.Inspect(ctx, drivers.Ref{Cluster: "api", Name: "test"}); err != nil || m.State != drivers.StateMissing {
		t.Errorf("inspect of a domain hwk did not make: %+v (%v)", m, err)
	}
	if m, err := d.Inspect(ctx, drivers.Ref{Cluster: "other", Name: "api-cp"}); err != nil || m.State != drivers.StateMissing {
		t.Errorf("inspect from another cluster: %+v (%v)", m, err)
	}
	if ms, err := d.List(ctx, "api"); err != nil || len(ms) != 1 || ms[0].Name != "api-cp" {
		t.Errorf("list: %+v (%v)", ms, err)
	}
	if ms, err := d.List(ctx, "other"); err != nil || len(ms) != 0 {
		t.Errorf("list of another cluster: %+v (%v)", ms, err)
	}
	for range 2 {
		if err := d.Start(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	if m, _ := d.Inspect(ctx, ref); m.State != drivers.StateRunning || m.Detail != "running" {
		t.Errorf("after start: %+v", m)
	}
	if ep, err := d.HostEndpoint(ctx, ref, 6443); err != nil || ep.String() != "172.31.250.10:6443" {
		t.Errorf("endpoint %v (%v)", ep, err)
	}
	for range 2 {
		if err := d.Stop(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	if m, _ := d.Inspect(ctx, ref); m.State != drivers.StateStopped {
		t.Errorf("after stop: %+v", m)
	}
	// hwk stop turns autostart off, hwk start on again.
	dom, err := l.DomainLookupByName("api-cp")
	if err != nil {
		t.Fatal(err)
	}
	for _, on := range []bool{true, false} {
		if err := d.SetAutostart(ctx, ref, on); err != nil {
			t.Fatal(err)
		}
		if got, err := l.DomainGetAutostart(dom); err != nil || (got == 1) != on {
			t.Errorf("autostart %v: libvirt says %d (%v)", on, got, err)
		}
	}
	if err := d.SetAutostart(ctx, drivers.Ref{Cluster: "api", Name: "gone"}, true); err == nil {
		t.Error("autostart of a missing domain succeeded")
	}
	want := "node test of cluster api has no libvirt domain\n  fix: remove the cluster with `hwk down --name api` and make it again"
	if err := d.Start(ctx, drivers.Ref{Cluster: "api", Name: "test"}); err == nil || err.Error() != want {
		t.Errorf("start of a domain hwk did not make: %v", err)
	}
	if _, err := d.Node(ctx, drivers.Ref{Cluster: "api", Name: "api-cp"}); err == nil || err.Error() != "node api-cp is shut off, not running; start it with `hwk start --name api`" {
		t.Errorf("node of a stopped machine: %v", err)
	}
	if _, err := d.Node(ctx, drivers.Ref{Cluster: "api", Name: "gone"}); err == nil || err.Error() != "node gone of cluster api has no libvirt domain" {
		t.Errorf("node of a missing machine: %v", err)
	}

	// Create refuses a name some other domain holds, before making
	// anything.
	foreign := spec("test", config.Linux, config.Worker, "172.31.250.11")
	foreign.Cluster, foreign.Image = "api", fakeQCOW2(t, 1<<30)
	want = "test is already used by libvirt domain \"test\", which is not part of cluster api\n  fix: rename the node in the cluster config (or pick another cluster name), or remove it with `virsh -c qemu:///system undefine --nvram test`"
	var inUse *drivers.NameInUseError
	if err := d.Create(ctx, foreign); !errors.As(err, &inUse) || err.Error() != want {
		t.Errorf("create over a foreign domain: %v", err)
	}

	// Delete removes ours (twice over) and never the foreign one.
	for range 2 {
		if err := d.Delete(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Delete(ctx, drivers.Ref{Cluster: "api", Name: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := domainState(l, "api-cp"); found {
		t.Error("api-cp is still defined after delete")
	}
	if _, found, _ := domainState(l, "test"); !found {
		t.Error("delete removed a domain hwk did not make")
	}
}

func TestMachineState(t *testing.T) {
	for s, want := range map[golibvirt.DomainState]string{
		golibvirt.DomainRunning:     "running/running",
		golibvirt.DomainBlocked:     "running/blocked",
		golibvirt.DomainShutoff:     "stopped/shut off",
		golibvirt.DomainPaused:      "other/paused",
		golibvirt.DomainShutdown:    "other/shutting down",
		golibvirt.DomainCrashed:     "other/crashed",
		golibvirt.DomainPmsuspended: "other/suspended",
		golibvirt.DomainNostate:     "other/state 0",
	} {
		st, detail := machineState(s)
		if got := string(st) + "/" + detail; got != want {
			t.Errorf("state %d: %s, want %s", s, got, want)
		}
	}
}

func TestFirstLine(t *testing.T) {
	msg := "internal error: qemu unexpectedly closed the monitor: 2026-11-22T07:44:55.093672Z qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69\nqemu-system-x86_64: ../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: Assertion failed."
	if got := firstLine(msg); got != "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69" {
		t.Errorf("got %q", got)
	}
	if got := firstLine("Cannot access storage file '/x'"); got != "Cannot access storage file '/x'" {
		t.Errorf("got %q", got)
	}
}

func TestMarkerWriter(t *testing.T) {
	w := &markerWriter{markers: firmwareMarkers, found: make(chan struct{})}
	w.Write([]byte("\x1b[2J\x1b[01;01H"))
	w.Write([]byte(strings.Repeat("x", 1000) + "Bds"))
	select {
	case <-w.found:
		t.Fatal("found a marker too early")
	default:
	}
	// The marker arrives cut in two.
	w.Write([]byte("Dxe: loading Boot0001"))
	select {
	case <-w.found:
	default:
		t.Fatal("the marker was missed")
	}
	if w.size() != 12+1003+21 {
		t.Errorf("size %d", w.size())
	}
}

func TestProbeXML(t *testing.T) {
	x, err := probeXML(true, "/var/lib/libvirt/images/hwk/p_VARS.fd")
	if err != nil {
		t.Fatal(err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	if d.Type != "kvm" || d.CPU.Mode != "host-passthrough" || d.OS.Firmware != "efi" || d.OS.NVRam.NVRam != "/var/lib/libvirt/images/hwk/p_VARS.fd" ||
		len(d.Devices.Disks) != 0 || len(d.Devices.Interfaces) != 0 || len(d.Devices.Serials) != 1 {
		t.Errorf("probe domain:\n%s", x)
	}
}

func TestPreflightWithoutLibvirt(t *testing.T) {
	d := New(Options{Sockets: []string{filepath.Join(t.TempDir(), "libvirt-sock")}})
	_, err := d.Preflight(context.Background())
	var ue *drivers.UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Fix, "apt-get install libvirt-daemon-system") {
		t.Errorf("got %v", err)
	}
	if d.Emulated() {
		t.Error("emulated before any probe")
	}
}

func TestSpeedWarning(t *testing.T) {
	got := speedWarning(accel{Why: "QEMU could not start a kvm guest: failed to set MSR 0x10a to 0x69"})
	want := "TCG: QEMU emulates the CPU, so nodes boot and run several times slower than with KVM (KVM here: QEMU could not start a kvm guest: failed to set MSR 0x10a to 0x69)"
	if got != want {
		t.Errorf("got %q", got)
	}
}

func TestLeaseMessages(t *testing.T) {
	r := drivers.Ref{Cluster: "demo", Name: "demo-cp"}
	ip := netip.MustParseAddr("172.31.250.10")
	if err := checkLease(r, ip, []string{"172.31.250.10"}, "/c.log"); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		leased []string
		want   string
	}{
		{nil, "node demo-cp (MAC 52:54:00:1f:fa:0a) has no DHCP lease on hwk-demo yet: it is still booting, or its network did not come up (console log: /c.log)"},
		{[]string{"172.31.250.77"}, "node demo-cp (MAC 52:54:00:1f:fa:0a) leased 172.31.250.77, not its reserved 172.31.250.10; its console log is /c.log"},
	} {
		if err := checkLease(r, ip, tc.leased, "/c.log"); err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v", tc.leased, err)
		}
	}
}

func TestAccelErrors(t *testing.T) {
	err := accelError(errNoFirmware)
	want := "driver libvirt is not usable: QEMU has no UEFI firmware (OVMF), which hwk's node images boot with\n  fix: install OVMF: `sudo apt-get install ovmf` (Fedora: edk2-ovmf), then restart libvirtd"
	if err.Error() != want {
		t.Errorf("got %q", err)
	}
	err = accelError(errors.New("QEMU cannot run x86_64 q35 guests here: unsupported"))
	want = "driver libvirt is not usable: QEMU cannot run x86_64 q35 guests here: unsupported\n  fix: check that `virsh -c qemu:///system domcapabilities --machine q35` works; install qemu-system-x86 if it does not"
	if err.Error() != want {
		t.Errorf("got %q", err)
	}
}

// TestCreateNeedsTheNetwork checks that nodes are made on the cluster's
// network, at one of its node addresses; otherwise nothing is made.
func TestCreateNeedsTheNetwork(t *testing.T) {
	d, l := testDriver(t, procRoutes)
	ctx := context.Background()
	s := spec("nonet-cp", config.Linux, config.ControlPlane, "172.31.250.10")
	s.Cluster, s.Image = "nonet", fakeQCOW2(t, 1<<30)
	want := "cluster nonet has no libvirt network hwk-nonet; it is made before the nodes (`hwk up` does)"
	if err := d.Create(ctx, s); err == nil || err.Error() != want {
		t.Errorf("no network: %v", err)
	}
	t.Cleanup(func() { _ = removeNetwork(l, "hwk-nonet") })
	if err := d.EnsureNetwork(ctx, drivers.Network{Cluster: "nonet", Subnet: subnet}); err != nil {
		t.Fatal(err)
	}
	for ip, want := range map[string]string{
		"172.31.251.10": "node nonet-cp: address 172.31.251.10 is not a node address of the cluster's subnet 172.31.250.0/24",
		"172.31.250.1":  "node nonet-cp: address 172.31.250.1 is not a node address of the cluster's subnet 172.31.250.0/24",
	} {
		s.IP = netip.MustParseAddr(ip)
		if err := d.Create(ctx, s); err == nil || err.Error() != want {
			t.Errorf("%s: %v", ip, err)
		}
	}
	if ms, _ := d.List(ctx, "nonet"); len(ms) != 0 {
		t.Errorf("a refused create made %v", ms)
	}
	if _, err := os.Stat(d.files().Cluster("nonet")); !os.IsNotExist(err) {
		t.Errorf("a refused create wrote files (%v)", err)
	}
}

// TestNodeNeedsPinnedKeys checks that without the cluster's key or the
// node's pinned host key there is no handle (a Windows domain: no DHCP lease
// to check).
func TestNodeNeedsPinnedKeys(t *testing.T) {
	d, l := testDriver(t, procRoutes)
	ctx := context.Background()
	ref := drivers.Ref{Cluster: "pin", Name: "pin-win"}
	s := domainSpec{MachineSpec: spec(ref.Name, config.Windows, config.Worker, "172.31.250.11"), Disk: "/x/w.qcow2", Seed: "/x/w.iso", NVRAM: "/x/w_VARS.fd", Console: "/x/w.log"}
	s.Cluster = ref.Cluster
	x, err := domainXML(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.DomainDefineXMLFlags(x, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeDomain(l, ref.Name) })
	if err := d.Start(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Node(ctx, ref); err == nil || !strings.HasPrefix(err.Error(), "SSH key: open "+d.files().Paths(ref).ClusterKey) {
		t.Errorf("no cluster key: %v", err)
	}
	spec2, err := d.seed(s.MachineSpec)
	if err != nil {
		t.Fatal(err)
	}
	if keys := spec2.Seed.SSHAuthorizedKeys; len(keys) != 2 || !strings.HasSuffix(keys[1], " hwk cluster pin") || len(spec2.Seed.Files) != 2 {
		t.Errorf("seed keys %q, %d files", keys, len(spec2.Seed.Files))
	}
	if h, err := d.Node(ctx, ref); err != nil || h.Name() != ref.Name || h.OS() != config.Windows {
		t.Errorf("with both keys: %v %v", h, err)
	}
	pinned, _ := os.ReadFile(d.files().Paths(ref).KnownHosts)
	os.WriteFile(d.files().Paths(ref).KnownHosts, []byte(strings.Replace(string(pinned), "172.31.250.11 ", "172.31.250.99 ", 1)), 0o644)
	want := "node pin-win: " + d.files().Paths(ref).KnownHosts + " pins no host key for 172.31.250.11 (<nil>)"
	if _, err := d.Node(ctx, ref); err == nil || err.Error() != want {
		t.Errorf("a pin for another address: %v", err)
	}
	os.Remove(d.files().Paths(ref).KnownHosts)
	if _, err := d.Node(ctx, ref); err == nil || !strings.HasPrefix(err.Error(), "node pin-win: its pinned host key: open ") {
		t.Errorf("no pin: %v", err)
	}
}

// TestCreateRefusesSeedFiles checks that a seed file the driver cannot place
// is refused before any key or volume is made.
func TestCreateRefusesSeedFiles(t *testing.T) {
	d, l := testDriver(t, procRoutes)
	ctx := context.Background()
	t.Cleanup(func() { _ = removeNetwork(l, "hwk-files") })
	if err := d.EnsureNetwork(ctx, drivers.Network{Cluster: "files", Subnet: subnet}); err != nil {
		t.Fatal(err)
	}
	s := spec("files-cp", config.Linux, config.ControlPlane, "172.31.250.10")
	s.Cluster, s.Image = "files", fakeQCOW2(t, 1<<30)
	s.Seed.Files = []drivers.File{{Path: "/etc/motd", Content: []byte("hi")}}
	if err := d.Create(ctx, s); err == nil || err.Error() != "node files-cp: a VM node's seed cannot place /etc/motd (only the SSH host key)" {
		t.Errorf("got %v", err)
	}
	if _, err := os.Stat(d.files().Cluster("files")); !os.IsNotExist(err) {
		t.Errorf("a refused create wrote files (%v)", err)
	}
}
