// Package doctor checks a host for what hwk needs, each check with the
// exact fix when it fails: hardware virtualization, the drivers, the
// hypervisors' coexistence on Windows, memory and disk for the nodes a
// cluster asks for, the Docker engine's mode and clock, a free node
// subnet, and ports other Kubernetes distributions hold. The host is
// reached through Probes, so that every OS's checks can be tested on any.
package doctor

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Status is a check's verdict.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
	// Skip is a check that does not apply here (no Windows node asked
	// for, no Docker engine needed).
	Skip Status = "skip"
)

// Check is one line of the report.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Virtualization is what the host reports of hardware virtualization.
type Virtualization struct {
	// Enabled: the CPU has VT-x/AMD-V and the firmware has it on (or a
	// hypervisor already runs, which needs it).
	Enabled bool
	// Hypervisor is true when Windows runs on a hypervisor (Hyper-V or
	// the Windows Hypervisor Platform is on).
	Hypervisor bool
	Detail     string
}

// Engine is the Docker engine as doctor sees it.
type Engine struct {
	Version string
	// OSType is "linux", or "windows" for Docker Desktop in Windows
	// containers mode.
	OSType string
	// Time is the engine's clock (its VM's, with Docker Desktop).
	Time time.Time
}

// Probes reach the host. Each may fail; a failed probe is a warning, not
// a verdict.
type Probes struct {
	// OS is a GOOS value.
	OS             string
	Virtualization func(context.Context) (Virtualization, error)
	// Memory is the total and the available physical memory in bytes.
	Memory func(context.Context) (total, available uint64, err error)
	// DiskFree is the free space of the file system holding path.
	DiskFree func(path string) (uint64, error)
	// Engine describes the Docker engine (an error: not reachable).
	Engine func(context.Context) (*Engine, error)
	// VirtualBox is VirtualBox's install directory, "" when it is not
	// installed.
	VirtualBox func() string
	// Listening reports whether something accepts connections on
	// 127.0.0.1:port.
	Listening func(port int) bool
	Now       func() time.Time
}

// Input is what to judge: the probes, the drivers' own preflights, the
// cluster that would be made and the subnet up would give it.
type Input struct {
	Probes Probes
	// Drivers runs the drivers' preflights (drivers.Registry.Check).
	Drivers func(context.Context) []drivers.Availability
	Cluster *config.Cluster
	// NodeDriver is a node's driver, for the memory its VM takes when it
	// starts (drivers.StartupMemory); nil counts none.
	NodeDriver func(config.Node) (drivers.Driver, error)
	// Existing is true when Cluster is the record of a cluster that
	// exists, not the one up would make; Subnet is then the one it has.
	Existing bool
	// Source is where a cluster that does not exist yet comes from (a
	// config file, or the flags and defaults), for the report.
	Source string
	// DataDir is where node disks and caches go.
	DataDir string
	Subnet  netip.Prefix
	// SubnetErr is why no subnet could be found.
	SubnetErr error
	// Images are the cached node images ("OS KUBERNETES-VERSION" each,
	// e.g. "windows v1.35.4"); WindowsImageHelp tells how to make one.
	Images           []string
	WindowsImageHelp string
	// NoLinuxPull is why up could not pull a Linux node image (this
	// build pins none for the version); nil when it could.
	NoLinuxPull error

	// drivers is what Drivers found, once per Run.
	drivers []drivers.Availability
}

// maxSkew is the clock difference past which certificates made on one
// side look not yet valid, or expired, to the other.
const maxSkew = 30 * time.Second

// ProbeTimeout bounds each probe of the host (its facts through
// PowerShell, its memory, the Docker engine, a disk's free space): one
// that does not answer makes its check a warning naming the probe.
const ProbeTimeout = 20 * time.Second

// probeLimit is ProbeTimeout, shortened by tests.
var probeLimit = ProbeTimeout

// Run makes every check, in the order of the report, and hands each to
// emit (when not nil) as soon as it is made, so that the report is
// printed as it goes. While a probe or a driver's preflight is slow, the
// context's note function (ui.WithNotes) hears what it is waiting for.
func Run(ctx context.Context, in Input, emit func(Check)) []Check {
	var out []Check
	add := func(c Check) {
		out = append(out, c)
		if emit != nil {
			emit(c)
		}
	}
	if in.Cluster != nil {
		add(target(in))
	}
	in.Probes = in.Probes.timed()
	if in.Drivers != nil {
		in.drivers = in.Drivers(ctx)
	}
	add(virtualization(ctx, in))
	for _, a := range in.drivers {
		add(driverCheck(a, in))
	}
	if in.Probes.OS == "windows" {
		add(coexistence(ctx, in))
	}
	add(images(in))
	add(memory(ctx, in))
	add(disk(in))
	add(engine(ctx, in))
	add(subnet(in))
	add(ports(in))
	return out
}

// Failed reports whether any check failed.
func Failed(cs []Check) bool {
	for _, c := range cs {
		if c.Status == Fail {
			return true
		}
	}
	return false
}

func virtualization(ctx context.Context, in Input) Check {
	c := Check{Name: "virtualization"}
	v, err := in.Probes.Virtualization(ctx)
	switch {
	case err != nil:
		c.Status, c.Detail = Warn, "could not tell: "+err.Error()
	case v.Enabled && emulated(in) != "":
		// /dev/kvm is there, yet the VM driver found QEMU cannot run a
		// KVM guest (a VM without nested virtualization, an MSR QEMU
		// cannot set): VMs would be emulated.
		c.Status, c.Detail = Warn, v.Detail+"; but the "+emulated(in)+" driver cannot use it and emulates the CPU"
		c.Fix = "in a VM, turn on nested virtualization on its host; check `dmesg | grep -i kvm` for why KVM guests fail"
	case v.Enabled:
		c.Status, c.Detail = OK, v.Detail
	default:
		c.Status, c.Detail = Fail, v.Detail
		c.Fix = map[string]string{
			"linux":   "turn on Intel VT-x or AMD-V (SVM) in the firmware setup, then `sudo modprobe kvm_intel` (or kvm_amd); in a VM, turn on nested virtualization on its host",
			"windows": "turn on Intel VT-x or AMD-V (SVM) in the firmware (UEFI/BIOS) setup and restart; Task Manager > Performance > CPU shows \"Virtualization: Enabled\" when it is on",
			"darwin":  "this Mac's CPU has no hardware virtualization for VMs (sysctl kern.hv_support is 0); use another machine",
		}[in.Probes.OS]
		if needsOnlyContainers(in) {
			c.Status = Warn
			c.Detail += "; the docker driver's Linux nodes do not need it, VM nodes (Windows) do"
		}
	}
	return c
}

// emulated returns the name of a driver of the cluster's (of any, with no
// cluster) that works only by emulating the CPU, or "".
func emulated(in Input) string {
	for _, a := range in.drivers {
		if a.Available && a.Emulated && (in.Cluster == nil || usesDriver(in.Cluster, a.Name)) {
			return a.Name
		}
	}
	return ""
}

// needsOnlyContainers reports whether every node of the cluster is a
// container (false with no cluster).
func needsOnlyContainers(in Input) bool {
	if in.Cluster == nil {
		return false
	}
	for _, n := range in.Cluster.Nodes {
		if n.Driver != config.DriverDocker {
			return false
		}
	}
	return true
}

// target returns the check that names the cluster the report is about,
// so that nobody reads a check of the defaults as one of their cluster.
func target(in Input) Check {
	c := Check{Name: "cluster", Status: OK}
	if in.Existing {
		c.Detail = fmt.Sprintf("cluster %s exists: checking its recorded nodes (%s) and drivers", in.Cluster.Name, nodeNames(in.Cluster))
		return c
	}
	c.Detail = fmt.Sprintf("no cluster %s yet: checking the cluster `hwk up` would make from %s", in.Cluster.Name, in.Source)
	return c
}

func nodeNames(c *config.Cluster) string {
	names := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		names[i] = fmt.Sprintf("%s on %s", n.Name, n.Driver)
	}
	return strings.Join(names, ", ")
}

func driverCheck(a drivers.Availability, in Input) Check {
	c := Check{Name: "driver " + a.Name, Detail: a.Detail, Fix: a.Fix}
	used := in.Cluster != nil && usesDriver(in.Cluster, a.Name)
	switch {
	case a.Available && a.Emulated:
		c.Status = Warn
		c.Detail += " (emulated: VMs run many times slower)"
	case a.Available:
		c.Status = OK
	case used:
		c.Status = Fail
	default:
		// A driver the cluster does not use is information.
		c.Status = Skip
	}
	if used {
		c.Detail += "; the cluster's nodes use it"
	}
	return c
}

func usesDriver(cfg *config.Cluster, name string) bool {
	for _, n := range cfg.Nodes {
		if n.Driver == name {
			return true
		}
	}
	return false
}

// coexistence returns the check that warns of VirtualBox on a Windows
// whose hypervisor is on, with Hyper-V as the driver to use.
func coexistence(ctx context.Context, in Input) Check {
	// Why: VirtualBox then runs its VMs through the Windows Hypervisor
	// Platform, slowly and with known failures.
	c := Check{Name: "hypervisors"}
	vbox := in.Probes.VirtualBox()
	v, err := in.Probes.Virtualization(ctx)
	switch {
	case err != nil:
		c.Status, c.Detail = Warn, "could not tell whether the Windows hypervisor runs: "+err.Error()
	case vbox != "" && v.Hypervisor:
		c.Status = Warn
		c.Detail = fmt.Sprintf("VirtualBox (%s) is installed and the Windows hypervisor is on (Hyper-V, WSL2 or the Windows Hypervisor Platform): VirtualBox VMs then run on it, slowly", vbox)
		c.Fix = "use the hyperv driver (the default here); to use VirtualBox at full speed instead, turn the hypervisor off (`bcdedit /set hypervisorlaunchtype off` in an elevated prompt, then restart; this also stops WSL2 and Docker Desktop)"
	case vbox != "":
		c.Status, c.Detail = OK, fmt.Sprintf("VirtualBox (%s) is installed and the Windows hypervisor is off: VirtualBox runs at full speed, Hyper-V is unavailable", vbox)
	default:
		c.Status, c.Detail = OK, "VirtualBox is not installed: no conflict with the Windows hypervisor"
	}
	return c
}

// images returns the check of the cluster's node images: a Windows node
// needs a Windows node image made here (it cannot be downloaded); a Linux
// node image up pulls when none is cached, if this build pins one.
func images(in Input) Check {
	c := Check{Name: "node images", Status: OK}
	if in.Cluster == nil {
		c.Status, c.Detail = Skip, "no cluster to check images for"
		return c
	}
	if in.Existing {
		c.Status, c.Detail = Skip, "the cluster's nodes are made; node images matter to up"
		return c
	}
	has := func(os config.OS) bool {
		for _, im := range in.Images {
			if strings.HasPrefix(im, string(os)+" ") {
				return true
			}
		}
		return false
	}
	var parts, fixes []string
	for _, os := range []config.OS{config.Linux, config.Windows} {
		needed := false
		for _, n := range in.Cluster.Nodes {
			needed = needed || (n.OS == os && !config.IsImageRef(n.Image))
		}
		switch {
		case !needed:
		case has(os):
			parts = append(parts, fmt.Sprintf("a %s node image is cached", os))
		case os == config.Windows:
			c.Status = Fail
			parts = append(parts, "no Windows node image is cached, and the cluster has Windows nodes")
			fixes = append(fixes, "for a Linux-only cluster, `hwk up --windows-workers 0`; otherwise "+in.WindowsImageHelp)
		case in.NoLinuxPull != nil:
			c.Status = Fail
			parts = append(parts, "no Linux node image is cached, and "+in.NoLinuxPull.Error())
			fixes = append(fixes, "for the Linux image: build it (`hwk node-image build linux`), load one made elsewhere (`hwk node-image load -i FILE`), or name one to pull (`hwk up --image REGISTRY/REPO:TAG`)")
		default:
			parts = append(parts, "no Linux node image is cached: up pulls the one this hwk build pins")
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "every node names an image to pull")
	}
	c.Detail = strings.Join(parts, "; ")
	c.Fix = strings.Join(fixes, "; and ")
	return c
}

// requested sums what the cluster's nodes ask for.
func requested(cfg *config.Cluster) (mem, disk int64, err error) {
	for _, n := range cfg.Nodes {
		m, err := resource.ParseQuantity(n.Memory)
		if err != nil {
			return 0, 0, fmt.Errorf("node %s memory: %w", n.Name, err)
		}
		d, err := resource.ParseQuantity(n.Disk)
		if err != nil {
			return 0, 0, fmt.Errorf("node %s disk: %w", n.Name, err)
		}
		mem += m.Value()
		disk += d.Value()
	}
	return mem, disk, nil
}

func memory(ctx context.Context, in Input) Check {
	c := Check{Name: "memory"}
	total, avail, err := in.Probes.Memory(ctx)
	if err != nil {
		c.Status, c.Detail = Warn, "could not read the host's memory: "+err.Error()
		return c
	}
	c.Status = OK
	c.Detail = fmt.Sprintf("%s available of %s", drivers.GiB(avail), drivers.GiB(total))
	if in.Cluster == nil {
		return c
	}
	want, _, err := requested(in.Cluster)
	if err != nil {
		c.Status, c.Detail = Warn, err.Error()
		return c
	}
	c.Detail += fmt.Sprintf("; the cluster asks %s for its %s", drivers.GiB(uint64(want)), nodes(len(in.Cluster.Nodes)))
	var need uint64
	if in.NodeDriver != nil {
		var shares []string
		need, shares, err = drivers.StartupMemory(in.Cluster.Nodes, in.NodeDriver)
		if err != nil {
			c.Status, c.Detail = Warn, err.Error()
			return c
		}
		if need > 0 {
			c.Detail += fmt.Sprintf(", and its VMs take %s to start (%s)", drivers.GiB(need), strings.Join(shares, ", "))
		}
	}
	switch {
	case need > avail:
		// What up refuses.
		c.Status = Fail
		c.Fix = "close programs to free memory, give the nodes less (--memory, or nodes[].memory in a config), or make fewer workers (--linux-workers, --windows-workers): up refuses VMs that cannot start"
	case uint64(want) > total:
		c.Status = Warn
		c.Fix = "give the nodes less memory (nodes[].memory in the config) or fewer workers (--linux-workers, --windows-workers): they cannot all have what they ask"
	case uint64(want) > avail && need > 0:
		c.Status = Warn
		c.Fix = "the VMs start in what is free and may grow to what the nodes ask, more than is free now: if the nodes run short, close programs or give them less (nodes[].memory)"
	case uint64(want) > avail:
		c.Status = Warn
		c.Fix = "close programs to free memory, or give the nodes less (nodes[].memory); VMs that cannot get their memory fail to start, containers are killed"
	}
	return c
}

func disk(in Input) Check {
	c := Check{Name: "disk"}
	free, err := in.Probes.DiskFree(in.DataDir)
	if err != nil {
		c.Status, c.Detail = Warn, fmt.Sprintf("could not read the free space under %s: %v", in.DataDir, err)
		return c
	}
	c.Status, c.Detail = OK, fmt.Sprintf("%s free under %s", drivers.GiB(free), in.DataDir)
	if in.Cluster == nil {
		return c
	}
	_, want, err := requested(in.Cluster)
	if err != nil {
		c.Status, c.Detail = Warn, err.Error()
		return c
	}
	// Node disks are thin (copy-on-write over the node image): what they
	// ask for is a ceiling. A tenth of it, and at least 10Gi, is what a
	// fresh cluster writes with its images.
	need := max(want/10, 10<<30)
	c.Detail += fmt.Sprintf("; the cluster's disks may grow to %s, a fresh one writes about %s", drivers.GiB(uint64(want)), drivers.GiB(uint64(need)))
	if int64(free) < need {
		c.Status = Fail
		c.Fix = fmt.Sprintf("free at least %s on the drive of %s (`hwk node-image list` shows cached images; delete unused clusters with `hwk down`)", drivers.GiB(uint64(need-int64(free))), in.DataDir)
	}
	return c
}

func engine(ctx context.Context, in Input) Check {
	c := Check{Name: "docker engine"}
	needed := in.Cluster != nil && usesDriver(in.Cluster, config.DriverDocker)
	e, err := in.Probes.Engine(ctx)
	if err != nil {
		c.Detail = "not reachable: " + firstLine(err.Error())
		c.Status = Skip
		if needed {
			c.Status = Fail
			c.Fix = "start Docker (Docker Desktop, or `sudo systemctl start docker`), or check DOCKER_HOST"
		}
		return c
	}
	c.Status, c.Detail = OK, fmt.Sprintf("Docker %s, %s containers", e.Version, e.OSType)
	if e.OSType != "linux" {
		c.Status = Fail
		c.Fix = "switch Docker Desktop to Linux containers (its tray icon: \"Switch to Linux containers...\"); hwk's docker nodes are Linux containers"
		return c
	}
	skew := e.Time.Sub(in.Probes.Now())
	if skew < 0 {
		skew = -skew
	}
	// The engine's clock is read a moment after it answered.
	c.Detail += fmt.Sprintf("; its clock is %s off this host's", skew.Round(time.Second))
	if skew > maxSkew {
		c.Status = Fail
		c.Fix = "the engine's clock has drifted (common after sleep with Docker Desktop): restart Docker Desktop, or `wsl --shutdown` for the WSL2 backend; on Linux, turn on time sync (`sudo timedatectl set-ntp true`)"
	}
	return c
}

func subnet(in Input) Check {
	c := Check{Name: "node subnet"}
	switch {
	case in.SubnetErr != nil:
		c.Status = Fail
		msg, fix, _ := strings.Cut(in.SubnetErr.Error(), "\n  fix: ")
		c.Detail, c.Fix = msg, fix
	case !in.Subnet.IsValid():
		c.Status, c.Detail = Skip, "no cluster to check a subnet for"
	case in.Existing:
		c.Status, c.Detail = OK, fmt.Sprintf("%s, recorded for the cluster when it was made", in.Subnet)
	default:
		c.Status = OK
		c.Detail = fmt.Sprintf("%s is free for the cluster", in.Subnet)
		if in.Cluster != nil && in.Cluster.AutoNodeSubnet() {
			c.Detail += " (the first free one from 172.31.250.0/24; up records the one it takes)"
		}
	}
	return c
}

// otherKubernetes are ports other local Kubernetes distributions listen
// on: the API server's and the kubelet's.
var otherKubernetes = []int{6443, 10250}

func ports(in Input) Check {
	c := Check{Name: "ports"}
	var taken []string
	for _, p := range otherKubernetes {
		if in.Probes.Listening(p) {
			taken = append(taken, fmt.Sprint(p))
		}
	}
	if len(taken) == 0 {
		c.Status, c.Detail = OK, "nothing listens on 127.0.0.1:6443 or :10250; hwk's docker nodes take a free loopback port each, VM nodes use their own addresses"
		return c
	}
	c.Status = Warn
	c.Detail = fmt.Sprintf("something listens on 127.0.0.1:%s, as another Kubernetes does (Docker Desktop's, Rancher Desktop's, minikube's); hwk does not need these ports, but kubectl's current context may point there", strings.Join(taken, ", :"))
	c.Fix = "use hwk's context explicitly (`kubectl --context hwk-NAME`), or stop the other Kubernetes if it is not needed"
	return c
}

func nodes(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
