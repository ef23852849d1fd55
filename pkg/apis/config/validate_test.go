package config

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const header = "apiVersion: hwk.dev/v1alpha1\nkind: Cluster\nname: demo\n"

type problem struct{ path, msg string }

func intp(i int) *int { return &i }

// resolveText runs the whole pipeline on a config text, as 'hwk config
// validate --config' does on a Linux host.
func resolveText(t *testing.T, text string, o Overrides) (*Cluster, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return Resolve(path, o, Host{OS: "linux"})
}

func problems(t *testing.T, err error) []problem {
	t.Helper()
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("want config.Errors, got %T: %v", err, err)
	}
	out := make([]problem, len(errs))
	for i, e := range errs {
		out[i] = problem{e.Path, e.Message}
	}
	return out
}

func TestBadConfigs(t *testing.T) {
	cases := []struct {
		name string
		text string
		o    Overrides
		want []problem
	}{
		{"empty file", "", Overrides{}, []problem{
			{"apiVersion", "the file is empty; start it with apiVersion: hwk.dev/v1alpha1 and kind: Cluster"}}},
		{"wrong apiVersion", "apiVersion: hwk.dev/v1\nkind: Cluster\n", Overrides{}, []problem{
			{"apiVersion", `"hwk.dev/v1" is not supported; use hwk.dev/v1alpha1`}}},
		{"missing kind", "apiVersion: hwk.dev/v1alpha1\n", Overrides{}, []problem{
			{"kind", "missing; add kind: Cluster"}}},
		{"two documents", header + "---\n" + header, Overrides{}, []problem{
			{"---", "a second YAML document; a config file holds exactly one Cluster"}}},
		{"misspelled field", header + "nmae: x\n", Overrides{}, []problem{
			{"nmae", `unknown field; did you mean "name"?`}}},
		{"unknown field", header + "colour: red\n", Overrides{}, []problem{
			{"colour", "unknown field; known fields here: apiVersion, autostart, calico, images, kind, kubernetesVersion, name, networking, nodes"}}},
		{"misspelled node field and wrong type together", header + "nodes:\n- role: control-plane\n  memroy: 4Gi\n  cpus: two\n", Overrides{}, []problem{
			{"nodes[0].memroy", `unknown field; did you mean "memory"?`},
			{"nodes[0].cpus", `"two" is not a whole number; use e.g. 2`}}},
		{"key set twice", header + "name: again\n", Overrides{}, []problem{
			{"name", "set twice (first on line 3); keep one"}}},
		{"nodes not a list", header + "nodes:\n  role: worker\n", Overrides{}, []problem{
			{"nodes", "must be a list, not a mapping"}}},
		{"port not a number", header + "networking:\n  apiServerPort: abc\n", Overrides{}, []problem{
			{"networking.apiServerPort", `"abc" is not a whole number; use e.g. 6443`}}},
		{"bad cluster name", strings.Replace(header, "demo", "My_Cluster", 1), Overrides{}, []problem{
			{"name", `"My_Cluster" is not a valid cluster name; use lowercase letters, digits and '-', starting and ending with a letter or digit`},
			{"nodes[0].name", `"My_Cluster-cp" is not DNS-safe; use lowercase letters, digits and '-', starting and ending with a letter or digit`},
			{"nodes[1].name", `"My_Cluster-win-1" is not DNS-safe; use lowercase letters, digits and '-', starting and ending with a letter or digit`}}},
		{"cluster name Windows keeps for a device", strings.Replace(header, "demo", "nul", 1), Overrides{}, []problem{
			{"name", `"nul" is a device name on Windows (CON, PRN, AUX, NUL, COM0-9, LPT0-9), which no file or directory may have there; choose another, e.g. nul-1`}}},
		{"node name Windows keeps for a device", header + "nodes:\n- role: control-plane\n  name: com1\n", Overrides{}, []problem{
			{"nodes[0].name", `"com1" is a device name on Windows (CON, PRN, AUX, NUL, COM0-9, LPT0-9), which no file or directory may have there; choose another`}}},
		{"long cluster name", strings.Replace(header, "demo", strings.Repeat("a", 33), 1), Overrides{}, []problem{
			{"name", `"` + strings.Repeat("a", 33) + `" is 33 characters; use at most 32`},
			{"nodes[1].name", `"` + strings.Repeat("a", 33) + `-win-1" is 39 characters; Windows computer names allow at most 15, set a shorter name (or a shorter cluster name)`}}},
		{"kubernetes version not a version", header + "kubernetesVersion: latest\n", Overrides{}, []problem{
			{"kubernetesVersion", `"latest" is not a Kubernetes release; use a full version such as v1.35.4`}}},
		{"kubernetes version unsupported", header + "kubernetesVersion: v1.30.2\n", Overrides{}, []problem{
			{"kubernetesVersion", "v1.30.2 is not supported; use v1.34.x, v1.35.x or v1.36.x (default v1.35.4)"}}},
		{"kubernetes version from flag", header, Overrides{KubernetesVersion: "2.0.0"}, []problem{
			{"kubernetesVersion", "v2.0.0 is not supported; use v1.34.x, v1.35.x or v1.36.x (default v1.35.4)"}}},
		{"node subnet not a CIDR", header + "networking:\n  nodeSubnet: 172.31.250.0/33\n", Overrides{}, []problem{
			{"networking.nodeSubnet", `"172.31.250.0/33" is not a CIDR; use e.g. 172.31.250.0/24`}}},
		{"pod subnet IPv6", header + "networking:\n  podSubnet: fd00::/64\n", Overrides{}, []problem{
			{"networking.podSubnet", "fd00::/64 is not IPv4; hwk clusters are IPv4 only (Calico VXLAN on Windows has no IPv6), use e.g. 10.244.0.0/16"}}},
		{"service subnet host bits", header + "networking:\n  serviceSubnet: 10.96.1.0/12\n", Overrides{}, []problem{
			{"networking.serviceSubnet", "10.96.1.0/12 has host bits set; use 10.96.0.0/12"}}},
		{"pod overlaps service", header + "networking:\n  podSubnet: 10.96.0.0/16\n", Overrides{}, []problem{
			{"networking.serviceSubnet", "10.96.0.0/12 overlaps networking.podSubnet (10.96.0.0/16); pick ranges that do not overlap"}}},
		{"node overlaps pod", header + "networking:\n  nodeSubnet: 10.244.5.0/24\n", Overrides{}, []problem{
			{"networking.podSubnet", "10.244.0.0/16 overlaps networking.nodeSubnet (10.244.5.0/24); pick ranges that do not overlap"}}},
		{"service subnet too large", header + "networking:\n  serviceSubnet: 100.64.0.0/10\n", Overrides{}, []problem{
			{"networking.serviceSubnet", "100.64.0.0/10 is too large; the API server allows at most a /12, use e.g. 10.96.0.0/12"}}},
		{"pod subnet too small", header + "networking:\n  podSubnet: 10.244.0.0/26\n", Overrides{}, []problem{
			{"networking.podSubnet", "10.244.0.0/26 is too small for 2 nodes (each node gets a /24); use e.g. 10.244.0.0/16"}}},
		{"node subnet too small", header + "networking:\n  nodeSubnet: 172.31.250.0/30\n", Overrides{}, []problem{
			{"networking.nodeSubnet", "172.31.250.0/30 is too small for a gateway and nodes; use a /29 or larger, e.g. 172.31.250.0/24"}}},
		{"api server port out of range", header + "networking:\n  apiServerPort: 70000\n", Overrides{}, []problem{
			{"networking.apiServerPort", "70000 is not a port; use 1-65535 (default 6443)"}}},
		{"node IP outside node subnet", header + "nodes:\n- role: control-plane\n  ip: 10.0.0.5\n", Overrides{}, []problem{
			{"nodes[0].ip", "10.0.0.5 is outside networking.nodeSubnet 172.31.250.0/24; use an address from 172.31.250.2 to 172.31.250.254"}}},
		{"node IP not an address", header + "nodes:\n- role: control-plane\n  ip: 172.31.250\n", Overrides{}, []problem{
			{"nodes[0].ip", `"172.31.250" is not an IPv4 address; use e.g. 172.31.250.11`}}},
		{"node IP is the gateway", header + "nodes:\n- role: control-plane\n  ip: 172.31.250.1\n", Overrides{}, []problem{
			{"nodes[0].ip", "172.31.250.1 is reserved (network address, gateway or broadcast); use an address from 172.31.250.2 to 172.31.250.254"}}},
		{"duplicate node IPs", header + "nodes:\n- role: control-plane\n  ip: 172.31.250.20\n- ip: 172.31.250.20\n", Overrides{}, []problem{
			{"nodes[1].ip", "172.31.250.20 is already used by nodes[0]; give each node its own address"}}},
		{"images.registry with a scheme", header + "images:\n  registry: https://registry.example.com/hwk\n", Overrides{}, []problem{
			{"images.registry", `"https://registry.example.com/hwk" has a scheme; use a registry and path such as registry.example.com/hwk-dev or 127.0.0.1:5000/hwk`}}},
		{"images.registry without a host", header + "images:\n  registry: hwk-dev\n", Overrides{}, []problem{
			{"images.registry", `"hwk-dev" is not a registry address; use a registry and path such as registry.example.com/hwk-dev or 127.0.0.1:5000/hwk`}}},
		{"node image reference without tag", header + "nodes:\n- role: control-plane\n  image: registry.example.com/hwk/node\n", Overrides{}, []problem{
			{"nodes[0].image", `"registry.example.com/hwk/node" names no tag or digest; use an image name from 'hwk node-image list' or a reference such as registry.example.com/hwk/node:v1.35.4`}}},
		{"memory flag too little for windows", header, Overrides{Memory: "1536Mi"}, []problem{
			{"nodes[0].memory", "1536Mi is too little for a control-plane node; use at least 1700Mi"},
			{"nodes[1].memory", "1536Mi is too little for a windows node; use at least 2Gi"}}},
		{"memory flag not a size", header, Overrides{Memory: "lots"}, []problem{
			{"nodes[0].memory", `"lots" is not a size; use e.g. 4Gi`},
			{"nodes[1].memory", `"lots" is not a size; use e.g. 6Gi`}}},
		{"image flag not a reference", header, Overrides{Image: "registry.example.com/HWK/node:v1"}, []problem{
			{"nodes[0].image", `"registry.example.com/HWK/node:v1" is not an image reference (invalid reference format: repository name (HWK/node) must be lowercase); use an image name from 'hwk node-image list' or a reference such as registry.example.com/hwk/node:v1.35.4`}}},
		{"no control plane", header + "nodes:\n- role: worker\n", Overrides{}, []problem{
			{"nodes", "no control-plane node; set role: control-plane on one linux node"}}},
		{"two control planes", header + "nodes:\n- role: control-plane\n- role: control-plane\n", Overrides{}, []problem{
			{"nodes[1].role", "a second control-plane node (nodes[0] is one); hwk clusters have exactly one, make this a worker"}}},
		{"windows control plane", header + "nodes:\n- role: control-plane\n  os: windows\n", Overrides{}, []problem{
			{"nodes[0].os", "a control-plane node must run linux; Kubernetes has no Windows control plane, make this node a worker"}}},
		{"unknown role", header + "nodes:\n- role: master\n", Overrides{}, []problem{
			{"nodes[0].role", `"master" is not a role; use control-plane or worker`},
			{"nodes", "no control-plane node; set role: control-plane on one linux node"}}},
		{"unknown os", header + "nodes:\n- role: control-plane\n- os: darwin\n", Overrides{}, []problem{
			{"nodes[1].os", `"darwin" is not supported; use linux or windows`}}},
		{"windows name over 15 characters", header + "nodes:\n- role: control-plane\n- os: windows\n  name: demo-windows-worker\n", Overrides{}, []problem{
			{"nodes[1].name", `"demo-windows-worker" is 19 characters; Windows computer names allow at most 15, set a shorter name (or a shorter cluster name)`}}},
		{"windows name not DNS-safe", header + "nodes:\n- role: control-plane\n- os: windows\n  name: Win_1\n", Overrides{}, []problem{
			{"nodes[1].name", `"Win_1" is not DNS-safe; use lowercase letters, digits and '-', starting and ending with a letter or digit`}}},
		{"linux name not DNS-safe", header + "nodes:\n- role: control-plane\n  name: -cp\n", Overrides{}, []problem{
			{"nodes[0].name", `"-cp" is not DNS-safe; use lowercase letters, digits and '-', starting and ending with a letter or digit`}}},
		{"duplicate node names", header + "nodes:\n- role: control-plane\n- name: w1\n- name: w1\n", Overrides{}, []problem{
			{"nodes[2].name", `"w1" is already used by nodes[1]; give each node its own name`}}},
		{"docker cannot host windows", header + "nodes:\n- role: control-plane\n  driver: docker\n- os: windows\n  driver: docker\n", Overrides{}, []problem{
			{"nodes[1].driver", "docker cannot host windows nodes; use hyperv, libvirt or virtualbox for windows nodes"}}},
		{"wsl2 cannot host windows", header + "nodes:\n- role: control-plane\n- os: windows\n  driver: wsl2\n", Overrides{}, []problem{
			{"nodes[1].driver", "wsl2 cannot host windows nodes; use hyperv, libvirt or virtualbox for windows nodes"}}},
		{"--driver docker with the default windows worker", header, Overrides{Driver: "docker"}, []problem{
			{"nodes[1].driver", "docker cannot host windows nodes; use hyperv, libvirt or virtualbox for windows nodes"}}},
		{"docker beside libvirt", header + "nodes:\n- role: control-plane\n  driver: docker\n- os: windows\n  driver: libvirt\n- driver: libvirt\n", Overrides{}, []problem{
			{"nodes[1].driver", "libvirt, but the control plane (nodes[0]) is on docker: a cluster's nodes share one network, which only one driver can make; put every node on libvirt (driver: libvirt on each node, or --driver libvirt)"},
			{"nodes[2].driver", "libvirt, but the control plane (nodes[0]) is on docker: a cluster's nodes share one network, which only one driver can make; put every node on libvirt (driver: libvirt on each node, or --driver libvirt)"}}},
		{"a linux worker on another driver", header + "nodes:\n- role: control-plane\n  driver: libvirt\n- driver: docker\n", Overrides{}, []problem{
			{"nodes[1].driver", "docker, but the control plane (nodes[0]) is on libvirt: a cluster's nodes share one network, which only one driver can make; put every node on libvirt (driver: libvirt on each node, or --driver libvirt)"}}},
		{"wsl2 worker", header + "nodes:\n- role: control-plane\n  driver: wsl2\n- driver: wsl2\n", Overrides{}, []problem{
			{"nodes[1].driver", "wsl2 runs a cluster's control plane only (all WSL distributions share one VM and one network); put this node on hyperv"}}},
		{"wsl2 control plane with a linux worker", header + "nodes:\n- role: control-plane\n  driver: wsl2\n- driver: hyperv\n", Overrides{}, []problem{
			{"nodes[1].driver", "hyperv, but with the control plane on wsl2 (experimental) the workers are Windows nodes on hyperv; remove this linux worker, or put the control plane on hyperv too (--driver hyperv)"}}},
		{"wsl2 control plane with a virtualbox windows worker", header + "nodes:\n- role: control-plane\n  driver: wsl2\n- os: windows\n  driver: virtualbox\n", Overrides{}, []problem{
			{"nodes[1].driver", "virtualbox, but with the control plane on wsl2 (experimental) the Windows workers must be on hyperv, whose switch the host routes to the WSL node; use driver: hyperv, or put the control plane on virtualbox too"}}},
		{"unknown driver", header + "nodes:\n- role: control-plane\n  driver: kvm\n", Overrides{}, []problem{
			{"nodes[0].driver", `"kvm" is not a driver; use one of docker, hyperv, libvirt, virtualbox, wsl2`}}},
		{"memory not a size", header + "nodes:\n- role: control-plane\n- role: worker\n  memory: 3x\n", Overrides{}, []problem{
			{"nodes[1].memory", `"3x" is not a size; use e.g. 2Gi`}}},
		{"control plane memory below kubeadm's minimum", header + "nodes:\n- role: control-plane\n  memory: 1Gi\n", Overrides{}, []problem{
			{"nodes[0].memory", "1Gi is too little for a control-plane node; use at least 1700Mi"}}},
		{"windows memory below minimum", header + "nodes:\n- role: control-plane\n- os: windows\n  memory: 1Gi\n", Overrides{}, []problem{
			{"nodes[1].memory", "1Gi is too little for a windows node; use at least 2Gi"}}},
		{"control plane with one cpu", header + "nodes:\n- role: control-plane\n  cpus: 1\n", Overrides{}, []problem{
			{"nodes[0].cpus", "1 is too few for a control-plane node; use at least 2"}}},
		{"windows with one cpu", header + "nodes:\n- role: control-plane\n- os: windows\n  cpus: 1\n", Overrides{}, []problem{
			{"nodes[1].cpus", "1 is too few for a windows node; use at least 2"}}},
		{"negative cpus", header + "nodes:\n- role: control-plane\n- cpus: -1\n", Overrides{}, []problem{
			{"nodes[1].cpus", "-1 is too few for a linux worker; use at least 1"}}},
		{"windows disk below minimum", header + "nodes:\n- role: control-plane\n- os: windows\n  disk: 20Gi\n", Overrides{}, []problem{
			{"nodes[1].disk", "20Gi is too little for a windows node; use at least 32Gi"}}},
		{"disk not a size", header + "nodes:\n- role: control-plane\n  disk: big\n", Overrides{}, []problem{
			{"nodes[0].disk", `"big" is not a size; use e.g. 20Gi`}}},
		{"windows version unsupported", header + "nodes:\n- role: control-plane\n- os: windows\n  windowsVersion: \"2019\"\n", Overrides{}, []problem{
			{"nodes[1].windowsVersion", `"2019" is not supported; use "2022" or "2025"`}}},
		{"windows version on a linux node", header + "nodes:\n- role: control-plane\n  windowsVersion: \"2022\"\n", Overrides{}, []problem{
			{"nodes[0].windowsVersion", "only windows nodes have a Windows version; remove it from this linux node"}}},
		{"calico VNI below 4096 with windows", header + "calico:\n  vxlanVNI: 100\n", Overrides{}, []problem{
			{"calico.vxlanVNI", "100 is below 4096, the least Windows nodes accept; use 4096"}}},
		{"calico port other than 4789 with windows", header + "calico:\n  vxlanPort: 8472\n", Overrides{}, []problem{
			{"calico.vxlanPort", "8472 cannot be used with Windows nodes, which only support VXLAN on UDP 4789; use 4789"}}},
		{"calico VNI out of range", header + "calico:\n  vxlanVNI: 20000000\n", Overrides{}, []problem{
			{"calico.vxlanVNI", "20000000 is not a VXLAN VNI; use 1-16777215 (default 4096)"}}},
		{"calico version unsupported", header + "calico:\n  version: v3.30.0\n", Overrides{}, []problem{
			{"calico.version", `"v3.30.0" is not supported; hwk embeds the manifests of v3.31.0, use that`}}},
		{"negative worker count flag", header, Overrides{WindowsWorkers: intp(-1)}, []problem{
			{"--windows-workers", "-1 is negative; use 0 or more"}}},
		{"three mistakes at once", header + "nodes:\n- role: control-plane\n  memory: 3x\n- os: windows\n  name: demo-windows-worker-1\n  driver: docker\n", Overrides{}, []problem{
			{"nodes[0].memory", `"3x" is not a size; use e.g. 4Gi`},
			{"nodes[1].name", `"demo-windows-worker-1" is 21 characters; Windows computer names allow at most 15, set a shorter name (or a shorter cluster name)`},
			{"nodes[1].driver", "docker cannot host windows nodes; use hyperv, libvirt or virtualbox for windows nodes"}}},
	}
	if len(cases) < 30 {
		t.Fatalf("the issue asks for at least 30 bad configs, have %d", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := resolveText(t, tc.text, tc.o)
			if err == nil {
				t.Fatalf("config was accepted:\n%s", tc.text)
			}
			if c != nil {
				t.Errorf("an invalid config was returned along with its errors")
			}
			got := problems(t, err)
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems differ\n got: %q\nwant: %q", got, tc.want)
			}
		})
	}
}

// TestErrorLines checks that problems point at the line the field is on,
// including for fields of nodes that flags moved around.
func TestErrorLines(t *testing.T) {
	text := header + // lines 1-3
		"nodes:\n" + // 4
		"- role: control-plane\n" + // 5
		"  memory: 3x\n" + // 6
		"- os: windows\n" + // 7
		"  name: far-too-long-windows\n" + // 8
		"- os: linux\n" + // 9
		"  cpus: 0\n" + // 10  (0 means unset: defaulted, no error)
		"  disk: small\n" // 11
	_, err := resolveText(t, text, Overrides{LinuxWorkers: intp(1)})
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("want Errors, got %v", err)
	}
	want := map[string]int{"nodes[0].memory": 6, "nodes[1].name": 8, "nodes[2].disk": 11}
	for _, e := range errs {
		if line, ok := want[e.Path]; !ok || e.Line != line {
			t.Errorf("%s: line %d, want %d (%v)", e.Path, e.Line, line, e)
		}
		delete(want, e.Path)
	}
	if len(want) > 0 {
		t.Errorf("missing problems: %v", want)
	}

	// A node a flag added has no line; its problem has line 0.
	_, err = resolveText(t, header+"nodes:\n- role: control-plane\n", Overrides{Driver: "wsl2", WindowsWorkers: intp(1)})
	errs = nil
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Path != "nodes[1].driver" || errs[0].Line != 0 {
		t.Errorf("want one line-less nodes[1].driver problem, got %#v", err)
	}
}

// TestFlagValuesHaveNoLine checks that a value a flag set is not on any line
// of the file, so its problem must not point into the file.
func TestFlagValuesHaveNoLine(t *testing.T) {
	text := header + "kubernetesVersion: v1.35.4\nnodes:\n- role: control-plane\n  os: windows\n"
	_, err := resolveText(t, text, Overrides{Driver: DriverDocker, KubernetesVersion: "v9.0.0"})
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("want Errors, got %v", err)
	}
	lines := map[string]int{}
	for _, e := range errs {
		lines[e.Path] = e.Line
	}
	want := map[string]int{"kubernetesVersion": 0, "nodes[0].os": 7, "nodes[0].driver": 0}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("lines = %v, want %v", lines, want)
	}
}

func TestSyntaxErrorNamesFile(t *testing.T) {
	_, err := resolveText(t, header+"nodes: [oops\n", Overrides{})
	var errs Errors
	if err == nil || errors.As(err, &errs) || !strings.Contains(err.Error(), "cluster.yaml: not valid YAML: yaml: line") {
		t.Errorf("got %v", err)
	}
}

func TestSuggestions(t *testing.T) {
	fields := yamlFields(reflect.TypeFor[Node]())
	for key, want := range map[string]string{
		"memroy":          `; did you mean "memory"?`,
		"cpu":             `; did you mean "cpus"?`,
		"WindowsVersion":  `; did you mean "windowsVersion"?`,
		"windows_version": `; did you mean "windowsVersion"?`,
		"base":            "; known fields here: cpus, disk, driver, image, ip, memory, name, os, role, windowsVersion",
	} {
		if got := suggest(key, fields); got != want {
			t.Errorf("suggest(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestWindowsBuildsMatchSupportedVersions checks that every supported
// Windows version has the build its nodes and images report, and no build is
// kept for a version hwk does not take.
func TestWindowsBuildsMatchSupportedVersions(t *testing.T) {
	got := slices.Sorted(maps.Keys(WindowsBuilds))
	want := slices.Sorted(slices.Values(supportedWindowsVersions))
	if !slices.Equal(got, want) {
		t.Errorf("WindowsBuilds has %v, supportedWindowsVersions %v", got, want)
	}
}

// TestReservedOnWindows checks ReservedOnWindows on the device names Windows
// keeps, with an extension or without, in any case, and on the names next to
// them that it does not keep.
func TestReservedOnWindows(t *testing.T) {
	for _, name := range []string{"con", "CON", "prn", "aux", "nul", "nul.txt", "com0", "com1", "com9", "lpt1", "lpt9.tar", "Aux.x.y", "nul "} {
		if !ReservedOnWindows(name) {
			t.Errorf("%q is reserved on Windows", name)
		}
		if err := CheckName(strings.ToLower(name)); err == nil {
			t.Errorf("CheckName(%q) = nil", name)
		}
	}
	for _, name := range []string{"cons", "con-1", "com", "com10", "lpt", "comx", "nul-cluster", "aux1", "demo"} {
		if ReservedOnWindows(name) {
			t.Errorf("%q is not reserved on Windows", name)
		}
	}
	if err := CheckImageName("nul.v1"); err == nil || !strings.Contains(err.Error(), "Windows keeps \"nul\" for a device") {
		t.Errorf("CheckImageName(nul.v1) = %v", err)
	}
	if err := CheckImageName("linux-v1.35."); err == nil {
		t.Error("CheckImageName(linux-v1.35.) = nil; Windows would name its directory linux-v1.35")
	}
	if err := CheckImageName("linux-v1.35.4"); err != nil {
		t.Errorf("CheckImageName(linux-v1.35.4) = %v", err)
	}
}
