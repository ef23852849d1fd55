package drivers_test

import (
	"context"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/testing/driverstest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

var (
	up1  = driverstest.Up
	down = driverstest.Down
)

func TestDefaultPerHostAndNodeOS(t *testing.T) {
	all := []string{config.DriverDocker, config.DriverHyperV, config.DriverLibvirt, config.DriverVirtualBox, config.DriverWSL2}
	up := func(except ...string) []drivers.Driver {
		var ds []drivers.Driver
		for _, n := range all {
			d := drivers.Driver(up1(n))
			if n == config.DriverWSL2 {
				// As it is built in: experimental.
				d = driverstest.UpExperimental(n)
			}
			for _, e := range except {
				if e == n {
					d = down(n)
				}
			}
			ds = append(ds, d)
		}
		return ds
	}
	cases := []struct {
		host    string
		drivers []drivers.Driver
		nodeOS  config.OS
		want    string // "" means an error
	}{
		{"windows", up(), config.Linux, config.DriverHyperV},
		{"windows", up(), config.Windows, config.DriverHyperV},
		{"windows", up(config.DriverHyperV), config.Linux, config.DriverVirtualBox},
		{"windows", up(config.DriverHyperV), config.Windows, config.DriverVirtualBox},
		// wsl2 is experimental: never the default, even when it is
		// the only driver after docker.
		{"windows", up(config.DriverHyperV, config.DriverVirtualBox), config.Linux, config.DriverDocker},
		{"windows", []drivers.Driver{driverstest.UpExperimental(config.DriverWSL2)}, config.Linux, ""},
		{"windows", up(config.DriverHyperV, config.DriverVirtualBox), config.Windows, ""},
		{"windows", up(config.DriverHyperV, config.DriverVirtualBox, config.DriverWSL2), config.Linux, config.DriverDocker},
		{"linux", up(), config.Linux, config.DriverLibvirt},
		{"linux", up(), config.Windows, config.DriverLibvirt},
		{"linux", up(config.DriverLibvirt), config.Linux, config.DriverDocker},
		{"linux", up(config.DriverLibvirt), config.Windows, config.DriverVirtualBox},
		{"linux", up(config.DriverLibvirt, config.DriverVirtualBox), config.Windows, ""},
		// Only docker built in (this build on Linux): Linux nodes get it,
		// Windows nodes get a clear no.
		{"linux", []drivers.Driver{up1(config.DriverDocker)}, config.Linux, config.DriverDocker},
		{"linux", []drivers.Driver{up1(config.DriverDocker)}, config.Windows, ""},
		// libvirt without KVM: Linux nodes go to docker at full speed,
		// Windows nodes have nowhere else to go.
		{"linux", []drivers.Driver{driverstest.Emulating(config.DriverLibvirt), up1(config.DriverDocker)}, config.Linux, config.DriverDocker},
		{"linux", []drivers.Driver{driverstest.Emulating(config.DriverLibvirt), up1(config.DriverDocker)}, config.Windows, config.DriverLibvirt},
		{"linux", []drivers.Driver{driverstest.Emulating(config.DriverLibvirt), down(config.DriverDocker)}, config.Linux, config.DriverLibvirt},
		{"darwin", up(), config.Linux, config.DriverVirtualBox},
		{"darwin", up(config.DriverVirtualBox), config.Linux, config.DriverDocker},
		{"darwin", up(config.DriverVirtualBox), config.Windows, ""},
	}
	for _, tc := range cases {
		r := drivers.NewRegistry(tc.drivers...)
		d, err := r.Default(context.Background(), tc.host, tc.nodeOS)
		got := ""
		if err == nil {
			got = d.Name()
		}
		if got != tc.want {
			t.Errorf("host %s, %d drivers, %s nodes: got %q (%v), want %q", tc.host, len(tc.drivers), tc.nodeOS, got, err, tc.want)
		}
	}
}

func TestDefaultErrorSaysWhyAndHowToFix(t *testing.T) {
	r := drivers.NewRegistry(up1(config.DriverDocker), down(config.DriverVirtualBox), down(config.DriverLibvirt))
	_, err := r.Default(context.Background(), "linux", config.Windows)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"no driver on this host can run windows nodes",
		"docker: cannot host windows nodes",
		"libvirt: libvirt is not installed (fix: install libvirt)",
		"virtualbox: virtualbox is not installed (fix: install virtualbox)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestCheck(t *testing.T) {
	r := drivers.NewRegistry(down(config.DriverLibvirt), up1(config.DriverDocker), driverstest.UpExperimental(config.DriverWSL2))
	got := r.Check(context.Background(), "linux")
	want := []drivers.Availability{
		{Name: "docker", GuestOSes: []config.OS{config.Linux}, Available: true, Detail: "docker 1.0", DefaultFor: []config.OS{config.Linux}},
		{Name: "libvirt", GuestOSes: []config.OS{config.Linux, config.Windows}, Detail: "libvirt is not installed", Fix: "install libvirt"},
		{Name: "wsl2", GuestOSes: []config.OS{config.Linux}, Available: true, Detail: "wsl2 1.0", Experimental: true, Limits: "a fake's limits"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Check =\n%+v\nwant\n%+v", got, want)
	}
	if _, err := r.Get("hyperv"); err == nil || !strings.Contains(err.Error(), "built-in drivers: docker, libvirt, wsl2") {
		t.Errorf("Get(hyperv) = %v", err)
	}
}

// TestCheckAsksUpChecker checks that a driver that can reach its machines
// but not make them here (drivers.UpChecker) is shown unavailable, with the
// fix, and is no default.
func TestCheckAsksUpChecker(t *testing.T) {
	r := drivers.NewRegistry(driverstest.RefusingUp{Fake: up1(config.DriverDocker)})
	got := r.Check(context.Background(), "linux")
	if len(got) != 1 || got[0].Available || got[0].Detail != "docker cannot make nodes here" || got[0].Fix != "reconfigure docker" || len(got[0].DefaultFor) != 0 {
		t.Errorf("Check = %+v", got)
	}
}

func TestErrorMessages(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{&drivers.UnavailableError{Driver: "docker", Reason: "cannot reach a Docker engine at unix:///var/run/docker.sock", Fix: "start it"},
			"driver docker is not usable: cannot reach a Docker engine at unix:///var/run/docker.sock\n  fix: start it"},
		{&drivers.ImageMissingError{Driver: "the Docker engine", Image: "hwk/node:v1.35.4", Build: "hwk node-image build linux"},
			"node image hwk/node:v1.35.4 is not in the Docker engine\n  fix: build it with `hwk node-image build linux`"},
		{&drivers.SubnetInUseError{Subnet: netip.MustParsePrefix("172.31.250.0/24"), By: `docker network "lab" (172.31.0.0/16)`, Remove: "docker network rm lab"},
			"subnet 172.31.250.0/24 overlaps docker network \"lab\" (172.31.0.0/16)\n  fix: set networking.nodeSubnet in the cluster config to a range nothing else uses, or remove it with `docker network rm lab`"},
		{&drivers.SubnetInUseError{Subnet: netip.MustParsePrefix("172.31.250.0/24"), By: "host interface tun0 (172.31.250.7/24)"},
			"subnet 172.31.250.0/24 overlaps host interface tun0 (172.31.250.7/24)\n  fix: set networking.nodeSubnet in the cluster config to a range nothing else uses"},
		{&drivers.NameInUseError{Name: "hwk-cp", Cluster: "hwk", Owner: `docker container "hwk-cp"`, Remove: "docker rm -f hwk-cp"},
			"hwk-cp is already used by docker container \"hwk-cp\", which is not part of cluster hwk\n  fix: rename the node in the cluster config (or pick another cluster name), or remove it with `docker rm -f hwk-cp`"},
	}
	for _, tc := range cases {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got\n%s\nwant\n%s", got, tc.want)
		}
	}
}

func TestGateway(t *testing.T) {
	n := drivers.Network{Subnet: netip.MustParsePrefix("172.31.250.0/24")}
	if g := n.Gateway(); g != netip.MustParseAddr("172.31.250.1") {
		t.Errorf("gateway %s", g)
	}
}
