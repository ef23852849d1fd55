package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// stripPositions drops file lines, which a round trip through YAML moves.
func stripPositions(c *Cluster) *Cluster {
	out := *c
	out.pos = nil
	// Whether the subnet was defaulted is how the config was written, not
	// what it means.
	out.autoSubnet = false
	out.Nodes = make([]Node, len(c.Nodes))
	for i, n := range c.Nodes {
		n.pos = nil
		out.Nodes[i] = n
	}
	return &out
}

func TestDefaultCluster(t *testing.T) {
	for host, driver := range map[string]string{"linux": DriverLibvirt, "windows": DriverHyperV, "darwin": DriverVirtualBox} {
		c, err := Resolve("", Overrides{}, Host{OS: host})
		if err != nil {
			t.Fatalf("%s: default config is invalid: %v", host, err)
		}
		want := &Cluster{
			APIVersion: APIVersion, Kind: Kind, Name: "hwk", KubernetesVersion: "v1.35.4",
			Networking: Networking{NodeSubnet: "172.31.250.0/24", PodSubnet: "10.244.0.0/16", ServiceSubnet: "10.96.0.0/12", APIServerPort: 6443},
			Nodes: []Node{
				{Name: "hwk-cp", Role: ControlPlane, OS: Linux, Driver: driver, IP: "172.31.250.10", CPUs: 2, Memory: "4Gi", Disk: "20Gi"},
				{Name: "hwk-win-1", Role: Worker, OS: Windows, Driver: driver, IP: "172.31.250.11", CPUs: 2, Memory: "6Gi", Disk: "64Gi", WindowsVersion: "2022"},
			},
			Calico:     Calico{Version: "v3.31.0", VXLANVNI: 4096, VXLANPort: 4789},
			autoSubnet: true,
		}
		if !reflect.DeepEqual(c, want) {
			t.Errorf("%s host:\n got %+v\nwant %+v", host, c, want)
		}
	}
}

// TestRoundTrip checks that the effective config, printed and loaded again,
// is the same config, and defaulting it again changes nothing.
func TestRoundTrip(t *testing.T) {
	for _, path := range []string{"", "testdata/full.yaml"} {
		c, err := Resolve(path, Overrides{}, Host{OS: "linux"})
		if err != nil {
			t.Fatalf("%q: %v", path, err)
		}
		data, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Decode(data)
		if err != nil {
			t.Fatalf("%q: printed config does not load: %v\n%s", path, err, data)
		}
		SetDefaults(again, Host{OS: "windows"}) // a different host must not matter: drivers are set
		if err := Validate(again); err != nil {
			t.Fatalf("%q: printed config is invalid: %v", path, err)
		}
		if !reflect.DeepEqual(stripPositions(again), stripPositions(c)) {
			t.Errorf("%q: round trip changed the config\nbefore %+v\nafter  %+v", path, c, again)
		}
	}
}

func TestFullConfigKeepsEveryValue(t *testing.T) {
	loaded, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	before := stripPositions(loaded)
	SetDefaults(loaded, Host{OS: "linux"})
	if !reflect.DeepEqual(stripPositions(loaded), before) {
		t.Errorf("defaults changed a fully set config\nbefore %+v\nafter  %+v", before, loaded)
	}
	if w := Warnings(loaded); len(w) != 1 || w[0] != "nodes[1].windowsVersion: Windows Server 2025 is experimental; 2022 is the tested default" {
		t.Errorf("warnings = %q", w)
	}
}

func TestOverrides(t *testing.T) {
	text := header + `nodes:
- role: control-plane
- os: windows
  name: win-a
- os: windows
  name: win-b
- name: lin-a
`
	c, err := resolveText(t, text, Overrides{
		Name:              "ci",
		KubernetesVersion: "1.36.1",
		Driver:            DriverVirtualBox,
		WindowsWorkers:    intp(1),
		LinuxWorkers:      intp(3),
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range c.Nodes {
		if n.Driver != DriverVirtualBox {
			t.Errorf("%s: driver %s, want the flag's", n.Name, n.Driver)
		}
		got = append(got, n.Name+"="+n.IP)
	}
	want := []string{"ci-cp=172.31.250.10", "win-a=172.31.250.11", "lin-a=172.31.250.12", "ci-linux-1=172.31.250.13", "ci-linux-2=172.31.250.14"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nodes = %v, want %v", got, want)
	}
	if c.Name != "ci" || c.KubernetesVersion != "v1.36.1" {
		t.Errorf("name %q version %q", c.Name, c.KubernetesVersion)
	}

	// Zero Windows workers leaves a Linux-only cluster, which may then
	// use docker and any VXLAN settings.
	c, err = resolveText(t, header+"calico:\n  vxlanVNI: 1\n  vxlanPort: 8472\n", Overrides{WindowsWorkers: intp(0), Driver: DriverDocker})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 1 || c.Nodes[0].Role != ControlPlane || c.HasWindows() {
		t.Errorf("nodes = %+v", c.Nodes)
	}

	// --memory gives every node the same memory, the file's too.
	c, err = resolveText(t, header+"nodes:\n- role: control-plane\n  memory: 8Gi\n- os: windows\n", Overrides{Memory: "3Gi"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if n.Memory != "3Gi" {
			t.Errorf("%s: memory %s, want the flag's 3Gi", n.Name, n.Memory)
		}
	}
}

func TestDefaultIPsSkipTakenAddresses(t *testing.T) {
	text := header + `nodes:
- ip: 172.31.250.11
- role: control-plane
- os: windows
`
	c, err := resolveText(t, text, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{c.Nodes[0].IP, c.Nodes[1].IP, c.Nodes[2].IP}
	want := []string{"172.31.250.11", "172.31.250.10", "172.31.250.12"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("IPs = %v, want %v", got, want)
	}

	// A /29 has no .10: addresses start after the gateway.
	c, err = resolveText(t, header+"networking:\n  nodeSubnet: 10.9.9.0/29\n", Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Nodes[0].IP != "10.9.9.2" || c.Nodes[1].IP != "10.9.9.3" {
		t.Errorf("IPs in a /29: %s %s", c.Nodes[0].IP, c.Nodes[1].IP)
	}
}

func TestDriverTable(t *testing.T) {
	if got := DriversFor(Windows); !reflect.DeepEqual(got, []string{"hyperv", "libvirt", "virtualbox"}) {
		t.Errorf("windows drivers = %v", got)
	}
	if got := DriversFor(Linux); len(got) != 5 {
		t.Errorf("linux drivers = %v", got)
	}
}

func TestDefaultNamesSkipGivenNames(t *testing.T) {
	c, err := resolveText(t, header+"nodes:\n- role: control-plane\n- os: windows\n- os: windows\n  name: demo-win-1\n", Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Nodes[1].Name + "," + c.Nodes[2].Name; got != "demo-win-2,demo-win-1" {
		t.Errorf("names = %s", got)
	}
}

// TestHostDriversPerOS checks that drivers the host reports working win
// over the static preference, per node OS, and never over a driver the file
// names, and that nodes that name none share one driver, since only one can
// make the cluster's network.
func TestHostDriversPerOS(t *testing.T) {
	linuxHost := Host{OS: "linux", Drivers: map[OS]string{Linux: DriverDocker, Windows: DriverLibvirt}}
	for _, tc := range []struct {
		name  string
		nodes []Node
		host  Host
		want  []string
	}{
		{"linux only: the linux driver", []Node{{Role: ControlPlane}, {}}, linuxHost, []string{DriverDocker, DriverDocker}},
		{"with windows: its driver for all", []Node{{Role: ControlPlane}, {OS: Windows}, {}}, linuxHost, []string{DriverLibvirt, DriverLibvirt, DriverLibvirt}},
		{"a named driver is shared", []Node{{Role: ControlPlane}, {OS: Windows}, {OS: Linux, Driver: DriverVirtualBox}}, linuxHost,
			[]string{DriverVirtualBox, DriverVirtualBox, DriverVirtualBox}},
		{"one windows cannot take is not", []Node{{Role: ControlPlane, Driver: DriverDocker}, {OS: Windows}}, linuxHost,
			[]string{DriverDocker, DriverLibvirt}},
		{"no host drivers: the static preference", []Node{{Role: ControlPlane}, {OS: Windows}}, Host{OS: "windows"}, []string{DriverHyperV, DriverHyperV}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Cluster{Nodes: tc.nodes}
			SetDefaults(c, tc.host)
			var got []string
			for _, n := range c.Nodes {
				got = append(got, n.Driver)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("drivers = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAutoNodeSubnet checks that the subnet is hwk's to choose only when the
// config names neither a subnet nor an address; moving it moves every node.
func TestAutoNodeSubnet(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		auto bool
	}{
		{"nothing named", "kind: Cluster\n", true},
		{"subnet named", "kind: Cluster\nnetworking: {nodeSubnet: 10.1.2.0/24}\n", false},
		{"address named", "kind: Cluster\nnodes: [{role: control-plane, ip: 172.31.250.20}]\n", false},
	} {
		c, err := Decode([]byte("apiVersion: hwk.dev/v1alpha1\n" + tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		SetDefaults(c, Host{OS: "linux"})
		if c.AutoNodeSubnet() != tc.auto {
			t.Errorf("%s: AutoNodeSubnet = %v", tc.name, c.AutoNodeSubnet())
		}
	}
	c, _ := Decode([]byte("apiVersion: hwk.dev/v1alpha1\nkind: Cluster\nnodes: [{role: control-plane}, {}, {}]\n"))
	SetDefaults(c, Host{OS: "linux"})
	c.SetNodeSubnet(netip.MustParsePrefix("172.31.252.0/24"))
	var ips []string
	for _, n := range c.Nodes {
		ips = append(ips, n.IP)
	}
	if c.Networking.NodeSubnet != "172.31.252.0/24" || strings.Join(ips, " ") != "172.31.252.10 172.31.252.11 172.31.252.12" {
		t.Errorf("moved to %s with nodes at %v", c.Networking.NodeSubnet, ips)
	}
	if err := Validate(c); err != nil {
		t.Errorf("moved config is invalid: %v", err)
	}

	cands := NodeSubnetCandidates()
	if len(cands) != 256 || cands[0].String() != DefaultNodeSubnet || cands[5].String() != "172.31.255.0/24" ||
		cands[6].String() != "172.31.0.0/24" || cands[255].String() != "172.31.249.0/24" {
		t.Errorf("candidates %v ... %v", cands[:7], cands[255])
	}
	for _, p := range cands {
		if !NodeSubnetRange.Contains(p.Addr()) {
			t.Errorf("candidate %s is outside %s", p, NodeSubnetRange)
		}
	}
}

// TestWSLControlPlane checks that a control plane on wsl2 keeps its Windows
// workers on the host's Windows driver (wsl2 cannot host them), and with
// Hyper-V that cluster is valid.
func TestWSLControlPlane(t *testing.T) {
	c := &Cluster{Nodes: []Node{{Role: ControlPlane, Driver: DriverWSL2}, {OS: Windows}}}
	SetDefaults(c, Host{OS: "windows", Drivers: map[OS]string{Linux: DriverHyperV, Windows: DriverHyperV}})
	if c.Nodes[0].Driver != DriverWSL2 || c.Nodes[1].Driver != DriverHyperV {
		t.Fatalf("drivers: %s, %s", c.Nodes[0].Driver, c.Nodes[1].Driver)
	}
	if err := Validate(c); err != nil {
		t.Errorf("a wsl2 control plane with a hyperv Windows worker: %v", err)
	}
}
