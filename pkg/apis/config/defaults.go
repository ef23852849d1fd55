package config

import (
	"fmt"
	"net/netip"
	"slices"
)

// Defaults, from DESIGN.md: one NAT network per cluster with a fixed subnet,
// control plane at .10 and workers from .11.
const (
	DefaultName              = "hwk"
	DefaultKubernetesVersion = "v1.35.4"
	DefaultNodeSubnet        = "172.31.250.0/24"
	DefaultPodSubnet         = "10.244.0.0/16"
	DefaultServiceSubnet     = "10.96.0.0/12"
	DefaultAPIServerPort     = 6443
	DefaultWindowsVersion    = "2022"
	DefaultCalicoVersion     = "v3.31.0"
	// Windows' VXLAN (HNS) only accepts VNIs from 4096 and only UDP 4789.
	DefaultVXLANVNI  = 4096
	DefaultVXLANPort = 4789

	controlPlaneHost = 10 // host part of the control plane's address
)

// resources is what a node gets when the config leaves it out. Windows gets
// more memory because the OS alone idles at about 1.5Gi and its pause,
// Calico and kube-proxy containers are HostProcess containers on top.
type resources struct {
	cpus         int
	memory, disk string
}

func defaultResources(n Node) resources {
	switch {
	case n.OS == Windows:
		return resources{cpus: 2, memory: "6Gi", disk: "64Gi"}
	case n.Role == ControlPlane:
		return resources{cpus: 2, memory: "4Gi", disk: "20Gi"}
	default:
		return resources{cpus: 2, memory: "2Gi", disk: "20Gi"}
	}
}

// DefaultNodes returns the topology when the config has no nodes: one Linux
// control plane and one Windows worker.
func DefaultNodes() []Node {
	return []Node{
		{Role: ControlPlane, OS: Linux},
		{Role: Worker, OS: Windows},
	}
}

// Host is what defaults depend on: the host's OS, and the drivers that
// work on it right now.
type Host struct {
	// OS is a GOOS value.
	OS string
	// Drivers is the driver to give nodes of each OS that name none,
	// usually the driver registry's pick among those that work here. An OS
	// missing from it gets DefaultDriver(OS).
	Drivers map[OS]string
}

// driver returns the driver a node of os gets when nothing names one.
func (h Host) driver(os OS) string {
	if d := h.Drivers[os]; d != "" {
		return d
	}
	return DefaultDriver(h.OS)
}

// sharedDriver returns the driver a node of os that names none gets: the
// driver another node names, when one that can host os does; else, in a
// cluster with Windows nodes, the host's driver for Windows nodes; else the
// host's driver for os.
func sharedDriver(nodes []Node, os OS, host Host) string {
	// Why: a cluster's nodes share one network, which each driver makes
	// its own way (a Docker bridge, a libvirt network, a Hyper-V switch)
	// and no two can make together. Each driver that hosts Windows nodes
	// hosts Linux nodes too.
	for _, n := range nodes {
		if n.Driver != "" && DriverCanHost(n.Driver, os) {
			return n.Driver
		}
	}
	if slices.ContainsFunc(nodes, func(n Node) bool { return n.OS == Windows }) {
		return host.driver(Windows)
	}
	return host.driver(os)
}

// SetDefaults fills every field the config left empty. The host picks the
// default driver. Values that are present are never
// changed, so validation still sees and reports what the user wrote;
// the only rewrite is adding the "v" that Kubernetes versions carry.
func SetDefaults(c *Cluster, host Host) {
	if c.APIVersion == "" {
		c.APIVersion = APIVersion
	}
	if c.Kind == "" {
		c.Kind = Kind
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.KubernetesVersion == "" {
		c.KubernetesVersion = DefaultKubernetesVersion
	}
	c.KubernetesVersion = normalizeVersion(c.KubernetesVersion)

	nw := &c.Networking
	if nw.NodeSubnet == "" {
		nw.NodeSubnet = DefaultNodeSubnet
		c.autoSubnet = !slices.ContainsFunc(c.Nodes, func(n Node) bool { return n.IP != "" })
	}
	if nw.PodSubnet == "" {
		nw.PodSubnet = DefaultPodSubnet
	}
	if nw.ServiceSubnet == "" {
		nw.ServiceSubnet = DefaultServiceSubnet
	}
	if nw.APIServerPort == 0 {
		nw.APIServerPort = DefaultAPIServerPort
	}

	if len(c.Nodes) == 0 {
		c.Nodes = DefaultNodes()
	}
	taken := map[string]bool{}
	for _, n := range c.Nodes {
		taken[n.Name] = true
	}
	counters := map[string]int{}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.OS == "" {
			n.OS = Linux
		}
		if n.Role == "" {
			n.Role = Worker
		}
		if n.Name == "" {
			n.Name = defaultNodeName(c.Name, *n, counters, taken)
		}
		if n.Driver == "" {
			n.Driver = sharedDriver(c.Nodes, n.OS, host)
		}
		r := defaultResources(*n)
		if n.CPUs == 0 {
			n.CPUs = r.cpus
		}
		if n.Memory == "" {
			n.Memory = r.memory
		}
		if n.Disk == "" {
			n.Disk = r.disk
		}
		if n.OS == Windows && n.WindowsVersion == "" {
			n.WindowsVersion = DefaultWindowsVersion
		}
	}
	defaultNodeIPs(c)

	if c.Calico.Version == "" {
		c.Calico.Version = DefaultCalicoVersion
	}
	if c.Calico.VXLANVNI == 0 {
		c.Calico.VXLANVNI = DefaultVXLANVNI
	}
	if c.Calico.VXLANPort == 0 {
		c.Calico.VXLANPort = DefaultVXLANPort
	}
}

// defaultNodeName names nodes NAME-cp, NAME-linux-N and NAME-win-N,
// counting each kind from 1 and skipping names other nodes were given
// (NAME-cp-2 for a second control plane, which validation then rejects).
func defaultNodeName(cluster string, n Node, counters map[string]int, taken map[string]bool) string {
	kind := "linux"
	switch {
	case n.Role == ControlPlane:
		kind = "cp"
	case n.OS == Windows:
		kind = "win"
	}
	for {
		counters[kind]++
		name := fmt.Sprintf("%s-%s-%d", cluster, kind, counters[kind])
		if kind == "cp" && counters[kind] == 1 {
			name = cluster + "-cp"
		}
		if !taken[name] {
			taken[name] = true
			return name
		}
	}
}

// defaultNodeIPs gives nodes without an address one from the node subnet:
// control plane .10, the rest from .11 upwards, skipping addresses that
// nodes were given explicitly. A subnet that does not parse is left for
// validation to report.
func defaultNodeIPs(c *Cluster) {
	prefix, err := netip.ParsePrefix(c.Networking.NodeSubnet)
	if err != nil || !prefix.Addr().Is4() {
		return
	}
	base := prefix.Masked().Addr()
	// .10 and up where the subnet has room for it, else right after the
	// gateway (.1).
	cpHost := controlPlaneHost
	if prefix.Bits() > 28 {
		cpHost = 2
	}
	taken := map[netip.Addr]bool{}
	for _, n := range c.Nodes {
		if a, err := netip.ParseAddr(n.IP); err == nil {
			taken[a] = true
		}
	}
	next := addN(base, cpHost+1)
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.IP != "" {
			continue
		}
		var a netip.Addr
		if cp := addN(base, cpHost); n.Role == ControlPlane && !taken[cp] {
			a = cp
		} else {
			for taken[next] {
				next = next.Next()
			}
			a = next
		}
		taken[a] = true
		n.IP = a.String()
	}
}

func addN(a netip.Addr, n int) netip.Addr {
	for range n {
		a = a.Next()
	}
	return a
}

// AutoNodeSubnet reports whether the node subnet is hwk's to choose: the
// config named neither networking.nodeSubnet nor any node's address.
func (c *Cluster) AutoNodeSubnet() bool { return c.autoSubnet }

// SetNodeSubnet puts a cluster whose subnet is hwk's to choose on p, with
// its nodes' addresses in p as defaults give them (control plane .10).
func (c *Cluster) SetNodeSubnet(p netip.Prefix) {
	c.Networking.NodeSubnet = p.Masked().String()
	for i := range c.Nodes {
		c.Nodes[i].IP = ""
	}
	defaultNodeIPs(c)
}

// NodeSubnetRange is where hwk looks for a free node subnet, a /24 at a
// time, when the config names none: DefaultNodeSubnet first, then upward,
// then from the start of the range. It is the range hwk's Hyper-V NAT
// covers, so every driver can use what is chosen.
var NodeSubnetRange = netip.MustParsePrefix("172.31.0.0/16")

// NodeSubnetCandidates returns the /24s of NodeSubnetRange in the order hwk
// tries them: 172.31.250.0/24 to 172.31.255.0/24, then 172.31.0.0/24 to
// 172.31.249.0/24.
func NodeSubnetCandidates() []netip.Prefix {
	first := netip.MustParsePrefix(DefaultNodeSubnet).Addr().As4()[2]
	out := make([]netip.Prefix, 0, 256)
	base := NodeSubnetRange.Addr().As4()
	for i := range 256 {
		a := base
		a[2] = byte((int(first) + i) % 256)
		out = append(out, netip.PrefixFrom(netip.AddrFrom4(a), 24))
	}
	return out
}

// normalizeVersion adds the leading "v" Kubernetes versions carry, so
// "1.35.4" and "v1.35.4" mean the same.
func normalizeVersion(v string) string {
	if v != "" && v[0] >= '0' && v[0] <= '9' {
		return "v" + v
	}
	return v
}
