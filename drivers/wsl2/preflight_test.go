package wsl2

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/drivers/internal/clitest"
)

// TestParseWSLConfig: .wslconfig as learn.microsoft.com/windows/wsl/wsl-config
// writes it: sections, keys in any case, sizes with units, comments.
func TestParseWSLConfig(t *testing.T) {
	c := parseWSLConfig("# Settings apply across all Linux distros running on WSL 2\r\n[wsl2]\r\nmemory=8GB \r\nNetworkingMode = Mirrored ; for hwk\r\nkernelCommandLine = cgroup_no_v1=all\r\n\r\n[experimental]\r\nautoMemoryReclaim=gradual\r\n")
	if c.networkingMode() != "mirrored" || c.memoryLimit() != 8<<30 || c["wsl2.kernelcommandline"] != "cgroup_no_v1=all" || c["experimental.automemoryreclaim"] != "gradual" {
		t.Errorf("%q", c)
	}
	for in, want := range map[string]string{"": "nat", "[wsl2]\nnetworkingMode=NAT\n": "nat", "[wsl2]\nnetworkingMode=bogus\n": "nat", "[wsl2]\nnetworkingMode=virtioproxy\n": "virtioproxy"} {
		if got := parseWSLConfig(in).networkingMode(); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
	if got := parseWSLConfig("[wsl2]\nmemory=4096MB\n").memoryLimit(); got != 4<<30 {
		t.Errorf("4096MB: %d", got)
	}
}

// TestJudge: every reason the WSL2 driver cannot be used, each with its
// fix, and the detail when it can.
func TestJudge(t *testing.T) {
	mirrored := parseWSLConfig("[wsl2]\nnetworkingMode=mirrored\n")
	good := hostFacts{version: "2.5.7.0", major: 2, windowsBuild: 26100, config: mirrored}
	for _, c := range []struct {
		name   string
		change func(*hostFacts)
		reason string
		fix    string
	}{
		{"inbox", func(f *hostFacts) { *f = hostFacts{inbox: true} }, "predates WSL 2.0", "wsl --update"},
		{"WSL 1.2", func(f *hostFacts) { f.version, f.major = "1.2.5.0", 1 }, "WSL 1.2.5.0 is too old", "wsl --update"},
		{"NAT", func(f *hostFacts) { f.config = wslConfig{} }, "networking mode is nat", "networkingMode=mirrored"},
		{"Windows 10", func(f *hostFacts) { f.config, f.windowsBuild = wslConfig{}, 19045 }, "networking mode is nat", "this is build 19045; use the hyperv or virtualbox driver"},
		{"another cluster's node", func(f *hostFacts) { f.nodes = map[string]string{"other": "hwk-other-cp"} }, "at most one hwk WSL node", "hwk down --name other"},
		{"ports", func(f *hostFacts) { f.busy = []uint16{6443, 10250} }, "ports 6443, 10250 are taken", "Docker Desktop: Settings > Kubernetes"},
		{"memory", func(f *hostFacts) { f.config = parseWSLConfig("[wsl2]\nnetworkingMode=mirrored\nmemory=2GB\n") }, "limits WSL's VM to 2048 MiB, and the node needs 4096 MiB", "memory=` under [wsl2] in %UserProfile%\\.wslconfig to 4GB"},
	} {
		f := good
		f.config = mirrored
		c.change(&f)
		_, err := judge(f, "demo", 4<<30)
		var ue *drivers.UnavailableError
		if !errors.As(err, &ue) || !strings.Contains(ue.Reason, c.reason) || !strings.Contains(ue.Fix, c.fix) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	good.nodes = map[string]string{"demo": "hwk-demo-cp"}
	if d, err := judge(good, "demo", 4<<30); err != nil || d != "WSL 2.5.7.0, mirrored networking (experimental)" {
		t.Errorf("good: %q %v", d, err)
	}
}

// TestGatherFacts: through the fake wsl.exe and a profile and cluster
// directory of the test's: versions, .wslconfig, the other cluster's node
// (found by its marker; a hwk- distribution without one is not a node),
// and a control plane port this test holds.
func TestGatherFacts(t *testing.T) {
	fake := clitest.New(t, "wsl.exe", "testdata", "facts.txt", nil)
	profile, clusters := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(profile, ".wslconfig"), []byte("[wsl2]\r\nnetworkingMode=mirrored\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := distros{dir: func(r drivers.Ref) string { return filepath.Join(clusters, r.Cluster, "wsl2", r.Name) }}
	dir := d.dir(drivers.Ref{Cluster: "other", Name: "other-cp"})
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, markerFile), []byte(`{"cluster":"other","node":"other-cp"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:10250")
	if err != nil {
		t.Skipf("port 10250 is taken here already: %v", err)
	}
	defer l.Close()
	f, err := gatherFacts(context.Background(), CLI{}, profile, clusters)
	if err != nil {
		t.Fatal(err)
	}
	fake.Check(t)
	if f.version != "2.5.7.0" || f.windowsBuild != 26100 || f.config.networkingMode() != "mirrored" || len(f.nodes) != 1 || f.nodes["other"] != "hwk-other-cp" || !slices.Contains(f.busy, 10250) {
		t.Errorf("facts: %+v", f)
	}
	if _, err := judge(f, "demo", 4<<30); err == nil || !strings.Contains(err.Error(), "cluster other's node hwk-other-cp") {
		t.Errorf("verdict: %v", err)
	}
}
