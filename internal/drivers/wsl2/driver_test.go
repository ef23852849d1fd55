package wsl2

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/hyperv"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/testing/hypervtest"
	"github.com/hwk-dev/hwk/internal/testing/wsltest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// freePort returns a TCP port nothing on this host listens on now.
func freePort(t *testing.T) uint16 {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

// testDriver returns a driver over the fake wsl.exe answering from
// transcript, with a profile whose .wslconfig holds wslconfig, and the
// spec of cluster demo's control plane.
func testDriver(t *testing.T, transcript, wslconfig string) (*Driver, *wsltest.Fake, drivers.MachineSpec, *[]string) {
	t.Helper()
	d, fake, spec, warnings, _ := testDriverPS(t, transcript, wslconfig, "wsl2-route.txt")
	return d, fake, spec, warnings
}

// testDriverPS returns testDriver's driver with the fake powershell.exe
// answering the host's scripts from
// internal/drivers/hyperv/testdata/transcripts/RULES (a fakeprog transcript).
func testDriverPS(t *testing.T, transcript, wslconfig, rules string) (*Driver, *wsltest.Fake, drivers.MachineSpec, *[]string, *hypervtest.FakePowerShell) {
	t.Helper()
	ps := hypervtest.New(t, rules)
	t.Cleanup(func() { ps.Check(t) })
	session := hyperv.NewSession(io.Discard)
	t.Cleanup(func() { session.Close() })
	dirs := state.Dirs{Data: t.TempDir(), Cache: t.TempDir(), Config: t.TempDir()}
	profile := t.TempDir()
	if err := os.WriteFile(filepath.Join(profile, ".wslconfig"), []byte(wslconfig), 0o644); err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(t.TempDir(), "rootfs.tar.gz")
	ref := drivers.Ref{Cluster: "demo", Name: "demo-cp"}
	var warnings []string
	d := New(Options{Dirs: dirs, Profile: profile, PowerShell: session, Warn: func(w string) { warnings = append(warnings, w) }})
	fake := wsltest.New(t, transcript, map[string]string{"NODEDIR": d.nodeDir(ref), "TAR": tarball})
	spec := drivers.MachineSpec{Ref: ref, Role: config.ControlPlane, OS: config.Linux, Image: tarball,
		CPUs: 2, MemoryBytes: 2 << 30, DiskBytes: 20 << 30, IP: netip.MustParseAddr("172.31.250.10"),
		Ports: []uint16{freePort(t)}, Start: true}
	return d, fake, spec, &warnings, ps
}

// untar reads a tar stream into path -> content.
func untar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}

// TestDriverLife checks a control plane through the fake wsl.exe from
// preflight to delete (transcripts/driver.txt): every call the driver
// makes is one the transcript expects, what it writes into the
// distribution is the node's setup, and the states between are right.
func TestDriverLife(t *testing.T) {
	d, fake, spec, warnings, ps := testDriverPS(t, "driver.txt", "[wsl2]\r\nmemory=8GB\r\n", "wsl2-route.txt")
	ctx := context.Background()
	detail, err := d.Preflight(ctx)
	if err != nil || detail != "WSL 2.5.7.0 on Windows build 26100, NAT networking (experimental)" {
		t.Fatalf("preflight: %q %v", detail, err)
	}
	if err := d.Create(ctx, spec); err == nil || !strings.Contains(err.Error(), "network was not set up") {
		t.Errorf("create before EnsureNetwork: %v", err)
	}
	subnet := netip.MustParsePrefix("172.31.250.0/24")
	if err := d.EnsureNetwork(ctx, drivers.Network{Cluster: "demo", Subnet: subnet}); err != nil {
		t.Fatal(err)
	}
	if err := d.Create(ctx, spec); err != nil {
		t.Fatalf("create: %v", err)
	}
	if len(*warnings) != 0 {
		t.Errorf("warnings: %q", *warnings)
	}

	// What went in on stdin: the files, and the scripts.
	calls := fake.Calls()
	var placed map[string]string
	for i, c := range calls {
		switch strings.Join(c, " ") {
		case "-d hwk-demo-cp -u root -e tar -x -p -C / -f -":
			placed = untar(t, fake.Input(i))
		case "-d hwk-demo-cp -u root -e sh -s hwk-setup":
			if got := string(fake.Input(i)); got != setupScript {
				t.Errorf("setup script on stdin: %q", got)
			}
		case "-d hwk-demo-cp -u root -e sh -s hwk-node-facts":
			if got := string(fake.Input(i)); got != factsScript() {
				t.Errorf("facts script on stdin: %q", got)
			}
		}
	}
	for name, want := range map[string]string{
		"etc/wsl.conf":                           "[boot]\nsystemd = true\n",
		"etc/hwk/wsl-net":                        "ADDRESS=172.31.250.10\nSUBNET=172.31.250.0/24\n",
		"etc/systemd/system/hwk-wsl-net.service": "RequiredBy=kubelet.service",
		"usr/local/sbin/hwk-wsl-net":             "ip -4 addr replace \"$ADDRESS/32\"",
		"etc/hostname":                           "demo-cp\n",
	} {
		if !strings.Contains(placed[name], want) {
			t.Errorf("%s placed in the distribution lacks %q:\n%s", name, want, placed[name])
		}
	}
	if !strings.Contains(placed["etc/wsl.conf"], "hostname = demo-cp\n") {
		t.Errorf("wsl.conf: %s", placed["etc/wsl.conf"])
	}

	if err := d.Start(ctx, spec.Ref); err != nil {
		t.Fatalf("start again: %v", err)
	}
	m, err := d.Inspect(ctx, spec.Ref)
	if err != nil || m.State != drivers.StateRunning || m.IP != spec.IP || m.Role != config.ControlPlane {
		t.Errorf("inspect: %+v %v", m, err)
	}
	if ms, err := d.List(ctx, "demo"); err != nil || len(ms) != 1 || ms[0].Name != "demo-cp" {
		t.Errorf("list: %+v %v", ms, err)
	}
	if ep, _ := d.HostEndpoint(ctx, spec.Ref, 6443); ep.String() != "127.0.0.1:6443" {
		t.Errorf("host endpoint: %s", ep)
	}

	n, err := d.Node(ctx, spec.Ref)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err = n.Run(ctx, node.Cmd{Args: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Stdout: &stdout, Stderr: &stderr})
	var ee *node.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Errorf("command: %v stdout %q stderr %q", err, stdout.String(), stderr.String())
	}

	for range 2 {
		if err := d.Stop(ctx, spec.Ref); err != nil {
			t.Errorf("stop: %v", err)
		}
	}
	if m, err := d.Inspect(ctx, spec.Ref); err != nil || m.State != drivers.StateStopped {
		t.Errorf("inspect after stop: %+v %v", m, err)
	}
	if err := d.Create(ctx, spec); err != nil {
		t.Errorf("create again: %v", err)
	}
	for range 2 {
		if err := d.Delete(ctx, spec.Ref); err != nil {
			t.Errorf("delete: %v", err)
		}
	}
	if _, err := os.Stat(d.nodeDir(spec.Ref)); !os.IsNotExist(err) {
		t.Errorf("the node's directory is still there: %v", err)
	}
	if m, err := d.Inspect(ctx, spec.Ref); err != nil || m.State != drivers.StateMissing {
		t.Errorf("inspect after delete: %+v %v", m, err)
	}
	fake.Check(t)
	// Routed at each of the two boots (not when start found it kept),
	// unrouted once by the first delete.
	log := ps.Requests()
	if n := strings.Count(log, "route demo-cp's address to WSL's VM"); n != 2 {
		t.Errorf("the host routed the node %d times, want 2:\n%s", n, log)
	}
	if n := strings.Count(log, "remove demo-cp's route"); n != 1 {
		t.Errorf("the host's route removed %d times, want 1", n)
	}
}

// TestDriverRefusesFromInside checks that Create refuses what only the
// distribution can see (a port held in WSL's one network, a cgroup v1
// kernel), with the reason and the fix, and leaves no distribution behind.
func TestDriverRefusesFromInside(t *testing.T) {
	d, fake, spec, _ := testDriver(t, "refuse-inside.txt", "")
	ctx := context.Background()
	if err := d.EnsureNetwork(ctx, drivers.Network{Cluster: "demo", Subnet: netip.MustParsePrefix("172.31.250.0/24")}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"port 10250 is taken, on this host or in WSL's network", "kubelet 1.35 refuses cgroup v1"} {
		err := d.Create(ctx, spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("create: %v; want %q", err, want)
		}
		if _, err := os.Stat(d.nodeDir(spec.Ref)); !os.IsNotExist(err) {
			t.Errorf("the refused node's directory is left: %v", err)
		}
	}
	fake.Check(t)
}

// TestDriverRefusesSecondNode checks that another cluster's WSL node
// refuses this one before anything is imported, and that a worker or a
// Windows node is refused at once.
func TestDriverRefusesSecondNode(t *testing.T) {
	d, fake, spec, _ := testDriver(t, "refuse-host.txt", "")
	ctx := context.Background()
	other := d.nodeDir(drivers.Ref{Cluster: "other", Name: "other-cp"})
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeMarker(other, marker{Cluster: "other", Node: "other-cp", Ready: true}); err != nil {
		t.Fatal(err)
	}
	if err := d.EnsureNetwork(ctx, drivers.Network{Cluster: "demo", Subnet: netip.MustParsePrefix("172.31.250.0/24")}); err != nil {
		t.Fatal(err)
	}
	err := d.Create(ctx, spec)
	var ue *drivers.UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "cluster other's node hwk-other-cp") || !strings.Contains(ue.Fix, "hwk down --name other") {
		t.Errorf("create: %v", err)
	}
	w := spec
	w.Name, w.Role = "demo-worker", config.Worker
	if err := d.Create(ctx, w); err == nil || !strings.Contains(err.Error(), "control plane only") {
		t.Errorf("worker: %v", err)
	}
	w.Role, w.OS = config.ControlPlane, config.Windows
	if err := d.Create(ctx, w); err == nil || !strings.Contains(err.Error(), "Linux nodes only") {
		t.Errorf("windows: %v", err)
	}
	fake.Check(t)
}

// TestDriverRefusesMirrored checks that mirrored networking is refused for
// up with the reason (WSL#11494) and the fix, while preflight, all that
// removing a cluster needs, still passes.
func TestDriverRefusesMirrored(t *testing.T) {
	d, fake, _, _ := testDriver(t, "refuse-host.txt", "[wsl2]\r\nnetworkingMode=mirrored\r\n")
	if detail, err := d.Preflight(context.Background()); err != nil || detail != "WSL 2.5.7.0 on Windows build 26100, mirrored networking (experimental)" {
		t.Errorf("preflight: %q %v", detail, err)
	}
	err := d.CheckUp(context.Background())
	var ue *drivers.UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "microsoft/WSL#11494") || !strings.Contains(ue.Fix, "remove `networkingMode=`") {
		t.Errorf("preflight: %v", err)
	}
	fake.Check(t)
}

// TestDriverSetupFails checks that a root file system that is not a node
// image is refused by setup, naming the fix, and that the distribution
// stays for Delete.
func TestDriverSetupFails(t *testing.T) {
	d, fake, spec, _ := testDriver(t, "setup-fails.txt", "")
	ctx := context.Background()
	if err := d.EnsureNetwork(ctx, drivers.Network{Cluster: "demo", Subnet: netip.MustParsePrefix("172.31.250.0/24")}); err != nil {
		t.Fatal(err)
	}
	err := d.Create(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "services are not all enabled (containerd.service, kubelet.service, hwk-wsl-net.service: enabled)") || !strings.Contains(err.Error(), "hwk node-image build linux") {
		t.Errorf("create: %v", err)
	}
	if m, err := d.Inspect(ctx, spec.Ref); err != nil || m.State != drivers.StateRunning {
		t.Errorf("inspect: %+v %v", m, err)
	}
	if err := d.Delete(ctx, spec.Ref); err != nil {
		t.Errorf("delete: %v", err)
	}
	fake.Check(t)
}

// TestDriverDistroRemovedByHand checks that a node whose distribution was
// unregistered outside hwk is missing, that start reports what happened
// and what to do, and that stop and delete succeed and leave nothing.
func TestDriverDistroRemovedByHand(t *testing.T) {
	d, fake, spec, _ := testDriver(t, "byhand.txt", "")
	ctx := context.Background()
	if err := d.EnsureNetwork(ctx, drivers.Network{Cluster: "demo", Subnet: netip.MustParsePrefix("172.31.250.0/24")}); err != nil {
		t.Fatal(err)
	}
	spec.Start = false
	if err := d.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if m, err := d.Inspect(ctx, spec.Ref); err != nil || m.State != drivers.StateMissing || m.IP != spec.IP {
		t.Errorf("inspect: %+v %v", m, err)
	}
	if ms, err := d.List(ctx, "demo"); err != nil || len(ms) != 1 || ms[0].State != drivers.StateMissing {
		t.Errorf("list: %+v %v", ms, err)
	}
	if err := d.Start(ctx, spec.Ref); err == nil || !strings.Contains(err.Error(), "unregistered outside hwk") {
		t.Errorf("start: %v", err)
	}
	if err := d.Stop(ctx, spec.Ref); err != nil {
		t.Errorf("stop: %v", err)
	}
	if err := d.Delete(ctx, spec.Ref); err != nil {
		t.Errorf("delete: %v", err)
	}
	if _, err := os.Stat(d.nodeDir(spec.Ref)); !os.IsNotExist(err) {
		t.Errorf("the node's directory is still there: %v", err)
	}
	fake.Check(t)
}

// TestDriverStartNotElevated checks that without the elevated PowerShell
// the route needs, Start reports why and what to do, and Delete keeps the
// route and rule with a warning naming how to remove them.
func TestDriverStartNotElevated(t *testing.T) {
	d, fake, spec, warnings, _ := testDriverPS(t, "not-elevated.txt", "", "wsl2-not-elevated.txt")
	ctx := context.Background()
	if err := d.EnsureNetwork(ctx, drivers.Network{Cluster: "demo", Subnet: netip.MustParsePrefix("172.31.250.0/24")}); err != nil {
		t.Fatal(err)
	}
	err := d.Create(ctx, spec)
	var ue *drivers.UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "172.31.250.10 must be routed from hwk's Hyper-V switch to WSL's VM (172.24.96.5 at this start)") || !strings.Contains(ue.Fix, "Run as administrator") {
		t.Errorf("create: %v", err)
	}
	if err := d.Delete(ctx, spec.Ref); err != nil {
		t.Errorf("delete: %v", err)
	}
	if len(*warnings) != 1 || !strings.Contains((*warnings)[0], "kept node demo-cp's route and firewall rule") {
		t.Errorf("warnings: %q", *warnings)
	}
	fake.Check(t)
}

// TestDriverPreflight checks each host-level refusal through the fake
// wsl.exe and the profile's .wslconfig, with its fix (the networking ones
// are up's, CheckUp), then a host that passes.
func TestDriverPreflight(t *testing.T) {
	d, fake, _, _ := testDriver(t, "preflight.txt", "")
	ctx := context.Background()
	for _, c := range []struct {
		wslconfig, reason, fix string
	}{
		{"", "the wsl.exe that ships with Windows", "wsl --update"},
		{"", "WSL 1.2.5.0 is too old", "run `wsl --update`"},
		{"", "optional component is off", "wsl --install --no-distribution"},
		{"[wsl2]\r\nnetworkingMode=mirrored\r\n", "networking mode is mirrored", "remove `networkingMode=`"},
		{"[wsl2]\r\nlocalhostForwarding=false\r\n", "localhostForwarding=false", "remove `localhostForwarding=false`"},
	} {
		if err := os.WriteFile(filepath.Join(d.profile, ".wslconfig"), []byte(c.wslconfig), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := d.Preflight(ctx)
		if err == nil {
			err = d.CheckUp(ctx)
		}
		var ue *drivers.UnavailableError
		if !errors.As(err, &ue) || !strings.Contains(ue.Reason, c.reason) || !strings.Contains(ue.Fix, c.fix) {
			t.Errorf("%q: %v", c.reason, err)
		}
	}
	if err := os.WriteFile(filepath.Join(d.profile, ".wslconfig"), []byte("[wsl2]\r\nmemory=8GB\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if detail, err := d.Preflight(ctx); err != nil || detail != "WSL 2.5.7.0 on Windows build 26100, NAT networking (experimental)" {
		t.Errorf("a good host: %q %v", detail, err)
	}
	if err := d.CheckUp(ctx); err != nil {
		t.Errorf("a good host, for up: %v", err)
	}
	fake.Check(t)
}
