package wsl2

import (
	"errors"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers"
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
