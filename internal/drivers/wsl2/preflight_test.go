package wsl2

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/testing/wsltest"
)

// TestParseWSLConfig checks parseWSLConfig on .wslconfig as
// learn.microsoft.com/windows/wsl/wsl-config writes it: sections, keys in
// any case, sizes with units, comments.
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

// TestJudge checks every reason the WSL2 driver cannot be used on this
// host, or for this node, each with its fix, and the detail when it can.
func TestJudge(t *testing.T) {
	good := hostFacts{version: "2.5.7.0", major: 2, windowsBuild: 26100, config: wslConfig{}}
	for _, c := range []struct {
		name   string
		change func(*hostFacts)
		busy   []uint16
		reason string
		fix    string
	}{
		{"inbox", func(f *hostFacts) { *f = hostFacts{inbox: true} }, nil, "predates WSL 2.0", "wsl --update"},
		{"WSL 1.2", func(f *hostFacts) { f.version, f.major = "1.2.5.0", 1 }, nil, "WSL 1.2.5.0 is too old", "wsl --update"},
		{"mirrored", func(f *hostFacts) { f.config = parseWSLConfig("[wsl2]\nnetworkingMode=mirrored\n") }, nil, "networking mode is mirrored: hwk's WSL node needs NAT mode", "remove `networkingMode=`"},
		{"bridged", func(f *hostFacts) { f.config = parseWSLConfig("[wsl2]\nnetworkingMode=bridged\nvmSwitch=ext\n") }, nil, "networking mode is bridged", "then `wsl --shutdown`"},
		{"no localhost forwarding", func(f *hostFacts) { f.config = parseWSLConfig("[wsl2]\nlocalhostForwarding=False\n") }, nil, "localhostForwarding=false", "remove `localhostForwarding=false`"},
		{"another cluster's node", func(f *hostFacts) { f.nodes = map[string]string{"other": "hwk-other-cp"} }, nil, "at most one hwk WSL node", "hwk down --name other"},
		{"ports", func(*hostFacts) {}, []uint16{6443, 10250}, "ports 6443, 10250 are taken", "Docker Desktop: Settings > Kubernetes"},
		{"port", func(*hostFacts) {}, []uint16{6443}, "port 6443 is taken", "Docker Desktop: Settings > Kubernetes"},
		{"memory", func(f *hostFacts) { f.config = parseWSLConfig("[wsl2]\nmemory=2GB\n") }, nil, "limits WSL's VM to 2048 MiB, and the node needs 4096 MiB", "memory=` under [wsl2] in %UserProfile%\\.wslconfig to 4GB"},
	} {
		f := good
		c.change(&f)
		_, err := judgeHost(f)
		if err == nil {
			err = judgeNode(f, "demo", 4<<30, c.busy)
		}
		var ue *drivers.UnavailableError
		if !errors.As(err, &ue) || !strings.Contains(ue.Reason, c.reason) || !strings.Contains(ue.Fix, c.fix) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	good.nodes = map[string]string{"demo": "hwk-demo-cp"}
	if d, err := judgeHost(good); err != nil || d != "WSL 2.5.7.0 on Windows build 26100, NAT networking (experimental)" {
		t.Errorf("good: %q %v", d, err)
	}
	if err := judgeNode(good, "demo", 4<<30, nil); err != nil {
		t.Errorf("good node: %v", err)
	}
}

// TestGatherFacts checks the facts gathered through the fake wsl.exe and a
// profile and cluster directory of the test's: versions, .wslconfig, the
// other cluster's node (found by its marker; a hwk- distribution without
// one is not a node), and a control plane port this test holds as taken.
func TestGatherFacts(t *testing.T) {
	fake := wsltest.New(t, "facts.txt", nil)
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
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	f, err := gatherFacts(context.Background(), CLI{}, profile, clusters)
	if err != nil {
		t.Fatal(err)
	}
	fake.Check(t)
	if f.version != "2.5.7.0" || f.windowsBuild != 26100 || f.config.networkingMode() != "mirrored" || len(f.nodes) != 1 || f.nodes["other"] != "hwk-other-cp" {
		t.Errorf("facts: %+v", f)
	}
	if !portTaken(port) {
		t.Errorf("port %d, which the test listens on, is not seen as taken", port)
	}
	if _, err := judgeHost(f); err == nil || !strings.Contains(err.Error(), "networking mode is mirrored") {
		t.Errorf("host verdict: %v", err)
	}
	if err := judgeNode(f, "demo", 4<<30, nil); err == nil || !strings.Contains(err.Error(), "cluster other's node hwk-other-cp") {
		t.Errorf("node verdict: %v", err)
	}
}
