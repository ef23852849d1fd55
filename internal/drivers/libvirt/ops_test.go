package libvirt

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// systemSockets are where a system libvirt listens.
var systemSockets = []string{"/var/run/libvirt/libvirt-sock", "/var/run/libvirt/virtqemud-sock"}

// daemon connects to uri through a real libvirtd, or skips the test when
// none runs (HWK_REQUIRE_LIBVIRT=1 makes that a failure, as in CI).
func daemon(t *testing.T, uri golibvirt.ConnectURI) *golibvirt.Libvirt {
	t.Helper()
	l, err := connect(systemSockets, uri)
	if err != nil {
		if os.Getenv("HWK_REQUIRE_LIBVIRT") == "1" {
			t.Fatalf("libvirt: %v", err)
		}
		t.Skipf("no libvirt here: %v", err)
	}
	t.Cleanup(func() { _ = l.Disconnect() })
	return l
}

// TestLifecycleOnTestDriver defines, starts, stops and removes the
// network and the Linux and Windows domains the driver generates, through
// libvirtd's test:///default driver, twice over to show each step is
// idempotent.
func TestLifecycleOnTestDriver(t *testing.T) {
	l := daemon(t, golibvirt.TestDefault)
	nwXML, err := networkXML(drivers.Network{Cluster: "api", Subnet: subnet}, []dhcpHost{{"api-cp", netip.MustParseAddr("172.31.250.10")}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := ensureNetwork(l, "hwk-api", nwXML); err != nil {
			t.Fatal(err)
		}
	}
	nw, err := l.NetworkLookupByName("hwk-api")
	if err != nil {
		t.Fatal(err)
	}
	if active, _ := l.NetworkIsActive(nw); active != 1 {
		t.Error("network not active after ensureNetwork")
	}

	for _, s := range []domainSpec{
		{MachineSpec: spec("api-cp", config.Linux, config.ControlPlane, "172.31.250.10"), Disk: "/x/api-cp.qcow2", Seed: "/x/api-cp.iso", NVRAM: "/x/api-cp_VARS.fd", Console: "/x/api-cp.log"},
		{MachineSpec: spec("api-win-1", config.Windows, config.Worker, "172.31.250.11"), Disk: "/x/w.qcow2", Seed: "/x/w.iso", NVRAM: "/x/w_VARS.fd", Console: "/x/w.log", TPM: true},
	} {
		s.Cluster = "api"
		xml, err := domainXML(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.DomainDefineXMLFlags(xml, 0); err != nil {
			t.Fatalf("define %s: %v", s.Name, err)
		}
		for range 2 {
			if err := startDomain(l, s.Name); err != nil {
				t.Fatal(err)
			}
		}
		if st, found, err := domainState(l, s.Name); err != nil || !found || st != golibvirt.DomainRunning {
			t.Fatalf("%s after start: %v %v %v", s.Name, st, found, err)
		}
		for range 2 {
			if err := stopDomain(context.Background(), l, s.Name, 2*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		if st, _, _ := domainState(l, s.Name); st != golibvirt.DomainShutoff {
			t.Errorf("%s after stop: state %v", s.Name, st)
		}
		for range 2 {
			if err := removeDomain(l, s.Name); err != nil {
				t.Fatal(err)
			}
		}
		if _, found, err := domainState(l, s.Name); err != nil || found {
			t.Errorf("%s after remove: found %v, %v", s.Name, found, err)
		}
	}
	for range 2 {
		if err := removeNetwork(l, "hwk-api"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.NetworkLookupByName("hwk-api"); !isCode(err, golibvirt.ErrNoNetwork) {
		t.Errorf("network after remove: %v", err)
	}
}

// TestNetworkOnSystemLibvirt makes the cluster network for real
// (qemu:///system: a bridge, NAT rules, dnsmasq) and removes it.
func TestNetworkOnSystemLibvirt(t *testing.T) {
	l := daemon(t, golibvirt.QEMUSystem)
	n := drivers.Network{Cluster: "hwk-it-net", Subnet: netip.MustParsePrefix("172.31.249.0/24")}
	xml, err := networkXML(n, []dhcpHost{{"it-cp", netip.MustParseAddr("172.31.249.10")}})
	if err != nil {
		t.Fatal(err)
	}
	name := NetworkName(n.Cluster)
	t.Cleanup(func() { _ = removeNetwork(l, name) })
	if err := ensureNetwork(l, name, xml); err != nil {
		t.Fatal(err)
	}
	nw, err := l.NetworkLookupByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if br, err := l.NetworkGetBridgeName(nw); err != nil || br != bridgeName(n.Cluster) {
		t.Errorf("bridge %q, %v; want %s", br, err, bridgeName(n.Cluster))
	}
	if err := removeNetwork(l, name); err != nil {
		t.Fatal(err)
	}
	if _, err := l.NetworkLookupByName(name); !isCode(err, golibvirt.ErrNoNetwork) {
		t.Errorf("network after remove: %v", err)
	}
}
