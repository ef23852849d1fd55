package config

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/distribution/reference"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Supported versions. Kubernetes minors are the ones hwk's node images are
// built and tested for; Windows Server 2025 works but is experimental.
var (
	supportedKubernetesMinors = []int{34, 35, 36}
	supportedWindowsVersions  = []string{"2022", "2025"}
)

// WindowsBuilds maps the Windows Server versions hwk supports to the build
// number kubelet puts in the node.kubernetes.io/windows-build label (and
// the os.version of the images a node of that version runs).
var WindowsBuilds = map[string]string{
	"2022": "10.0.20348",
	"2025": "10.0.26100",
}

const (
	maxWindowsNodeName = 15 // NetBIOS computer name limit
	maxNodeName        = 63 // DNS label limit
	nodeCIDRBits       = 24 // kube-controller-manager gives each node a /24
	maxServiceBits     = 20 // kube-apiserver refuses a larger IPv4 service range
	maxVNI             = 1<<24 - 1
	minWindowsVNI      = 4096
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

var kubernetesVersion = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)$`)

// minimum is the least a node may be given. The control plane's figures are
// kubeadm's own preflight limits (2 CPUs, 1700 MiB); Windows' are Windows
// Server's published minimums for disk and what a Server Core node running
// kubelet, containerd and Calico needs to stay up.
type minimum struct {
	what         string
	cpus         int
	memory, disk resource.Quantity
}

func minimumFor(n Node) minimum {
	switch {
	case n.OS == Windows:
		return minimum{"a windows node", 2, resource.MustParse("2Gi"), resource.MustParse("32Gi")}
	case n.Role == ControlPlane:
		return minimum{"a control-plane node", 2, resource.MustParse("1700Mi"), resource.MustParse("10Gi")}
	default:
		return minimum{"a linux worker", 1, resource.MustParse("1Gi"), resource.MustParse("10Gi")}
	}
}

// Validate checks a defaulted config and returns every problem it finds
// (as Errors), or nil.
func Validate(c *Cluster) error {
	var errs Errors
	validateMeta(c, &errs)
	subnets := validateNetworking(c, &errs)
	validateNodes(c, subnets.node, &errs)
	validateCalico(c, &errs)
	if r := c.Images.Registry; r != "" {
		if msg := checkRegistry(r); msg != "" {
			errs.add("images.registry", "%s", msg)
		}
	}
	for i := range errs {
		if errs[i].Line == 0 {
			errs[i].Line = c.line(errs[i].Path)
		}
	}
	return errs.orNil()
}

// Warnings lists what is allowed but worth saying.
func Warnings(c *Cluster) []string {
	var w []string
	for i, n := range c.Nodes {
		if n.OS == Windows && n.WindowsVersion == "2025" {
			w = append(w, fmt.Sprintf("nodes[%d].windowsVersion: Windows Server 2025 is experimental; 2022 is the tested default", i))
		}
	}
	return w
}

func validateMeta(c *Cluster, errs *Errors) {
	if c.APIVersion != APIVersion {
		errs.add("apiVersion", "%q is not supported; use %s", c.APIVersion, APIVersion)
	}
	if c.Kind != Kind {
		errs.add("kind", "%q is not supported; use %s", c.Kind, Kind)
	}
	if err := CheckName(c.Name); err != nil {
		errs.add("name", "%s", err)
	}

	m := kubernetesVersion.FindStringSubmatch(c.KubernetesVersion)
	if m == nil {
		errs.add("kubernetesVersion", "%q is not a Kubernetes release; use a full version such as %s", c.KubernetesVersion, DefaultKubernetesVersion)
		return
	}
	minor, _ := strconv.Atoi(m[2])
	if m[1] != "1" || !slices.Contains(supportedKubernetesMinors, minor) {
		var list []string
		for _, s := range supportedKubernetesMinors {
			list = append(list, fmt.Sprintf("v1.%d.x", s))
		}
		errs.add("kubernetesVersion", "%s is not supported; use %s (default %s)", c.KubernetesVersion, orList(list), DefaultKubernetesVersion)
	}
}

type subnetSet struct{ node, pod, service netip.Prefix }

func validateNetworking(c *Cluster, errs *Errors) subnetSet {
	nw := c.Networking
	var s subnetSet
	type named struct {
		path    string
		prefix  *netip.Prefix
		value   string
		example string
	}
	all := []named{
		{"networking.nodeSubnet", &s.node, nw.NodeSubnet, DefaultNodeSubnet},
		{"networking.podSubnet", &s.pod, nw.PodSubnet, DefaultPodSubnet},
		{"networking.serviceSubnet", &s.service, nw.ServiceSubnet, DefaultServiceSubnet},
	}
	for _, n := range all {
		p, err := netip.ParsePrefix(n.value)
		switch {
		case err != nil:
			errs.add(n.path, "%q is not a CIDR; use e.g. %s", n.value, n.example)
		case !p.Addr().Is4():
			errs.add(n.path, "%s is not IPv4; hwk clusters are IPv4 only (Calico VXLAN on Windows has no IPv6), use e.g. %s", n.value, n.example)
		case p.Masked() != p:
			errs.add(n.path, "%s has host bits set; use %s", n.value, p.Masked())
		default:
			*n.prefix = p
		}
	}

	if s.node.IsValid() && s.node.Bits() > 29 {
		errs.add("networking.nodeSubnet", "%s is too small for a gateway and nodes; use a /29 or larger, e.g. %s", s.node, DefaultNodeSubnet)
		s.node = netip.Prefix{} // node addresses cannot be judged against it
	}
	if s.pod.IsValid() {
		if s.pod.Bits() > nodeCIDRBits || 1<<(nodeCIDRBits-s.pod.Bits()) < len(c.Nodes) {
			errs.add("networking.podSubnet", "%s is too small for %d nodes (each node gets a /%d); use e.g. %s", s.pod, len(c.Nodes), nodeCIDRBits, DefaultPodSubnet)
		}
	}
	if s.service.IsValid() {
		switch {
		case 32-s.service.Bits() > maxServiceBits:
			errs.add("networking.serviceSubnet", "%s is too large; the API server allows at most a /%d, use e.g. %s", s.service, 32-maxServiceBits, DefaultServiceSubnet)
		case s.service.Bits() > 28:
			// .1 is the kubernetes service and .10 is cluster DNS.
			errs.add("networking.serviceSubnet", "%s is too small; use a /28 or larger, e.g. %s", s.service, DefaultServiceSubnet)
		}
	}
	for i := range all {
		for j := range i {
			a, b := all[j], all[i]
			if a.prefix.IsValid() && b.prefix.IsValid() && a.prefix.Overlaps(*b.prefix) {
				errs.add(b.path, "%s overlaps %s (%s); pick ranges that do not overlap", *b.prefix, a.path, *a.prefix)
			}
		}
	}
	if p := nw.APIServerPort; p < 1 || p > 65535 {
		errs.add("networking.apiServerPort", "%d is not a port; use 1-65535 (default %d)", p, DefaultAPIServerPort)
	}
	return s
}

func validateNodes(c *Cluster, subnet netip.Prefix, errs *Errors) {
	if len(c.Nodes) == 0 {
		errs.add("nodes", "no nodes; leave nodes out for the default (one linux control plane, one windows worker) or list them")
		return
	}
	names := map[string]int{}
	ips := map[netip.Addr]int{}
	controlPlane := -1
	for i, n := range c.Nodes {
		path := fmt.Sprintf("nodes[%d]", i)
		field := func(f string) string { return path + "." + f }

		osOK := true
		switch n.OS {
		case Linux, Windows:
		default:
			osOK = false
			errs.add(field("os"), "%q is not supported; use linux or windows", n.OS)
		}
		switch n.Role {
		case ControlPlane:
			if n.OS == Windows {
				errs.add(field("os"), "a control-plane node must run linux; Kubernetes has no Windows control plane, make this node a worker")
			}
			if controlPlane >= 0 {
				errs.add(field("role"), "a second control-plane node (nodes[%d] is one); hwk clusters have exactly one, make this a worker", controlPlane)
			} else {
				controlPlane = i
			}
		case Worker:
		default:
			errs.add(field("role"), "%q is not a role; use control-plane or worker", n.Role)
		}

		validateNodeName(n, field("name"), errs)
		if first, dup := names[n.Name]; dup {
			errs.add(field("name"), "%q is already used by nodes[%d]; give each node its own name", n.Name, first)
		} else {
			names[n.Name] = i
		}

		if _, known := driverGuests[n.Driver]; !known {
			errs.add(field("driver"), "%q is not a driver; use one of %s", n.Driver, strings.Join(DriverNames(), ", "))
		} else if osOK && !DriverCanHost(n.Driver, n.OS) {
			errs.add(field("driver"), "%s cannot host %s nodes; use %s for %s nodes", n.Driver, n.OS, orList(DriversFor(n.OS)), n.OS)
		}

		if a, ok := validateNodeIP(n.IP, subnet, field("ip"), errs); ok {
			if first, dup := ips[a]; dup {
				errs.add(field("ip"), "%s is already used by nodes[%d]; give each node its own address", a, first)
			} else {
				ips[a] = i
			}
		}

		validateResources(n, path, errs)

		if n.OS == Windows {
			if !slices.Contains(supportedWindowsVersions, n.WindowsVersion) {
				errs.add(field("windowsVersion"), "%q is not supported; use %s", n.WindowsVersion, orList(quoteAll(supportedWindowsVersions)))
			}
		} else if n.WindowsVersion != "" && osOK {
			errs.add(field("windowsVersion"), "only windows nodes have a Windows version; remove it from this %s node", n.OS)
		}
		switch {
		case strings.ContainsAny(n.Image, " \t\n"):
			errs.add(field("image"), "%q contains whitespace; use an image name from 'hwk node-image list' or a reference such as registry.example.com/hwk/node:%s", n.Image, c.KubernetesVersion)
		case IsImageRef(n.Image):
			if msg := checkImageRef(n.Image); msg != "" {
				errs.add(field("image"), "%s; use an image name from 'hwk node-image list' or a reference such as registry.example.com/hwk/node:%s", msg, c.KubernetesVersion)
			}
		case n.Image != "":
			if err := CheckImageName(n.Image); err != nil {
				errs.add(field("image"), "%s; use an image name from 'hwk node-image list' or a reference such as registry.example.com/hwk/node:%s", err, c.KubernetesVersion)
			}
		}
	}
	if controlPlane < 0 {
		errs.add("nodes", "no control-plane node; set role: control-plane on one linux node")
	} else if c.Nodes[controlPlane].Driver == DriverWSL2 {
		validateWSLCluster(c, errs)
	} else {
		validateOneDriver(c, controlPlane, errs)
	}
}

// validateWSLCluster holds a cluster whose control plane is a WSL2
// distribution to what that driver can do: the control plane is the
// cluster's one WSL node, and its workers are Windows VMs on Hyper-V.
func validateWSLCluster(c *Cluster, errs *Errors) {
	// Why: all distributions share one VM and network. The host routes
	// Hyper-V's switch to the WSL node's address; VirtualBox's NAT
	// Network cannot carry Calico's VXLAN to it, and Linux workers would
	// need the same route, which hwk sets up only on Windows workers.
	for i, n := range c.Nodes {
		path := fmt.Sprintf("nodes[%d].driver", i)
		switch {
		case n.Role == ControlPlane || !DriverCanHost(n.Driver, n.OS):
			// The control plane is the WSL node; a driver that cannot
			// host the node has its own error.
		case n.Driver == DriverWSL2:
			errs.add(path, "wsl2 runs a cluster's control plane only (all WSL distributions share one VM and one network); put this node on hyperv")
		case n.OS != Windows:
			errs.add(path, "%s, but with the control plane on wsl2 (experimental) the workers are Windows nodes on hyperv; remove this linux worker, or put the control plane on hyperv too (--driver hyperv)", n.Driver)
		case n.Driver != DriverHyperV && DriverCanHost(n.Driver, Windows):
			errs.add(path, "%s, but with the control plane on wsl2 (experimental) the Windows workers must be on hyperv, whose switch the host routes to the WSL node; use driver: hyperv, or put the control plane on %s too", n.Driver, n.Driver)
		}
	}
}

// validateOneDriver refuses a cluster whose nodes are on more than one
// driver: they share one network (the node subnet), and each driver makes
// its own, so the second network would be refused for overlapping the
// first. It names a driver that can host every node: the control plane's,
// or, when that cannot host the cluster's Windows nodes, theirs.
func validateOneDriver(c *Cluster, controlPlane int, errs *Errors) {
	cp := c.Nodes[controlPlane].Driver
	target := cp
	for _, n := range c.Nodes {
		if n.OS == Windows && !DriverCanHost(target, Windows) && DriverCanHost(n.Driver, Windows) {
			target = n.Driver
		}
	}
	for i, n := range c.Nodes {
		if n.Driver == cp || !DriverCanHost(n.Driver, n.OS) {
			continue
		}
		errs.add(fmt.Sprintf("nodes[%d].driver", i), "%s, but the control plane (nodes[%d]) is on %s: a cluster's nodes share one network, which only one driver can make; put every node on %s (driver: %s on each node, or --driver %s)",
			n.Driver, controlPlane, cp, target, target, target)
	}
}

func validateNodeName(n Node, path string, errs *Errors) {
	switch {
	case !dnsLabel.MatchString(n.Name):
		errs.add(path, "%q is not DNS-safe; use lowercase letters, digits and '-', starting and ending with a letter or digit", n.Name)
	case n.OS == Windows && len(n.Name) > maxWindowsNodeName:
		errs.add(path, "%q is %d characters; Windows computer names allow at most %d, set a shorter name (or a shorter cluster name)", n.Name, len(n.Name), maxWindowsNodeName)
	case len(n.Name) > maxNodeName:
		errs.add(path, "%q is %d characters; use at most %d", n.Name, len(n.Name), maxNodeName)
	case ReservedOnWindows(n.Name):
		errs.add(path, "%q is a device name on Windows (CON, PRN, AUX, NUL, COM0-9, LPT0-9), which no file or directory may have there; choose another", n.Name)
	}
}

// validateNodeIP checks a node address against the node subnet, whose
// first address is the gateway on the host side.
func validateNodeIP(ip string, subnet netip.Prefix, path string, errs *Errors) (netip.Addr, bool) {
	if ip == "" && !subnet.IsValid() {
		return netip.Addr{}, false // left empty because the subnet is wrong
	}
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		example := "172.31.250.11"
		if subnet.IsValid() {
			example = addN(subnet.Addr(), controlPlaneHost+1).String()
		}
		errs.add(path, "%q is not an IPv4 address; use e.g. %s", ip, example)
		return a, false
	}
	if !subnet.IsValid() {
		return a, true // the subnet's own error covers it
	}
	first, last := addN(subnet.Addr(), 2), lastAddr(subnet).Prev()
	switch {
	case !subnet.Contains(a):
		errs.add(path, "%s is outside networking.nodeSubnet %s; use an address from %s to %s", a, subnet, first, last)
	case a.Less(first) || last.Less(a):
		errs.add(path, "%s is reserved (network address, gateway or broadcast); use an address from %s to %s", a, first, last)
	}
	return a, true
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func validateResources(n Node, path string, errs *Errors) {
	minimum := minimumFor(n)
	if n.CPUs < minimum.cpus {
		errs.add(path+".cpus", "%d is too few for %s; use at least %d", n.CPUs, minimum.what, minimum.cpus)
	}
	checkSize := func(field, value string, least resource.Quantity, example string) {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			errs.add(path+"."+field, "%q is not a size; use e.g. %s", value, example)
			return
		}
		if q.Cmp(least) < 0 {
			errs.add(path+"."+field, "%s is too little for %s; use at least %s", value, minimum.what, least.String())
		}
	}
	r := defaultResources(n)
	checkSize("memory", n.Memory, minimum.memory, r.memory)
	checkSize("disk", n.Disk, minimum.disk, r.disk)
}

func validateCalico(c *Cluster, errs *Errors) {
	cal := c.Calico
	if cal.Version != DefaultCalicoVersion {
		errs.add("calico.version", "%q is not supported; hwk embeds the manifests of %s, use that", cal.Version, DefaultCalicoVersion)
	}
	windows := c.HasWindows()
	switch {
	case cal.VXLANVNI < 1 || cal.VXLANVNI > maxVNI:
		errs.add("calico.vxlanVNI", "%d is not a VXLAN VNI; use 1-%d (default %d)", cal.VXLANVNI, maxVNI, DefaultVXLANVNI)
	case windows && cal.VXLANVNI < minWindowsVNI:
		errs.add("calico.vxlanVNI", "%d is below %d, the least Windows nodes accept; use %d", cal.VXLANVNI, minWindowsVNI, DefaultVXLANVNI)
	}
	switch {
	case cal.VXLANPort < 1 || cal.VXLANPort > 65535:
		errs.add("calico.vxlanPort", "%d is not a port; use 1-65535 (default %d)", cal.VXLANPort, DefaultVXLANPort)
	case windows && cal.VXLANPort != DefaultVXLANPort:
		errs.add("calico.vxlanPort", "%d cannot be used with Windows nodes, which only support VXLAN on UDP %d; use %d", cal.VXLANPort, DefaultVXLANPort, DefaultVXLANPort)
	}
}

func quoteAll(list []string) []string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = strconv.Quote(s)
	}
	return q
}

// orList joins ["a","b","c"] as "a, b or c".
func orList(list []string) string {
	if len(list) < 2 {
		return strings.Join(list, "")
	}
	return strings.Join(list[:len(list)-1], ", ") + " or " + list[len(list)-1]
}

// checkImageRef returns what is wrong with a node image reference, if
// anything: it must parse and name a tag or a digest, since an image
// pulled by a bare name could be anything tomorrow.
func checkImageRef(s string) string {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return fmt.Sprintf("%q is not an image reference (%v)", s, err)
	}
	_, tagged := named.(reference.Tagged)
	_, digested := named.(reference.Digested)
	if !tagged && !digested {
		return fmt.Sprintf("%q names no tag or digest", s)
	}
	return ""
}

// checkRegistry returns what is wrong with images.registry, if anything: a
// registry host with an optional path, as in an image reference.
func checkRegistry(s string) string {
	const example = "use a registry and path such as registry.example.com/hwk-dev or 127.0.0.1:5000/hwk"
	if strings.Contains(s, "://") {
		return fmt.Sprintf("%q has a scheme; %s", s, example)
	}
	named, err := reference.ParseNamed(strings.TrimSuffix(s, "/") + "/node")
	if err != nil || reference.Domain(named) == "" || !strings.ContainsAny(strings.Split(s, "/")[0], ".:") && strings.Split(s, "/")[0] != "localhost" {
		return fmt.Sprintf("%q is not a registry address; %s", s, example)
	}
	return ""
}
