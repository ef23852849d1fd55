// Package virtualbox runs nodes as VirtualBox VMs: the driver for Windows
// 10/11 Home (which has no Hyper-V), for Intel Macs, and for Linux hosts
// without libvirt. Each cluster gets a NAT Network of its own with the
// nodes at static addresses from their seeds; the host reaches the API
// server and each node's SSH through ports forwarded on 127.0.0.1, pinned
// when the node is made. Each node's disk is a differencing disk on the
// node image's VDI, which is registered once per image as a multi-attach
// base.
//
// Every operation is a VBoxManage call, as minikube and Vagrant drive
// VirtualBox too: VBoxManage is the interface VirtualBox documents and
// keeps compatible, and its --machinereadable output is meant for this.
package virtualbox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// BuildCommand is what makes the Linux node image this driver boots.
const BuildCommand = "hwk node-image build linux --formats vdi"

// StopGrace is how long Stop waits for the guest to shut down after the
// ACPI power button before it powers the VM off.
var StopGrace = 60 * time.Second

// pollEvery is how often Stop and Install look at a VM's state.
var pollEvery = time.Second

// group is the VirtualBox group hwk's VMs are filed under, one subgroup
// per cluster, so that they sit together in VirtualBox Manager.
const group = "/hwk"

// Options configure a Driver.
type Options struct {
	// Dirs are hwk's directories: a cluster's directory holds its VMs'
	// disks, seeds, consoles and SSH identities; the cache the bases.
	Dirs state.Dirs
	// Runner runs VBoxManage; the host's when nil (one call at a time
	// in the whole process, whatever the driver).
	Runner Runner
	// Warn receives what an operation could not do but need not fail for.
	Warn func(string)
	// Force lets Preflight pass on a Windows whose hypervisor is on
	// (VirtualBox then runs on it, slowly), with a warning.
	Force bool
	// Hypervisor reports whether the Windows hypervisor runs; the host's
	// answer when nil.
	Hypervisor func(context.Context) (bool, error)
	// Handle reaches a node once VirtualBox says it runs; nil is SSH with
	// the cluster's key and the node's pinned host key, through the port
	// forwarded to its port 22. Tests give handles of their own.
	Handle func(name string, os config.OS, ip netip.Addr) (*node.Node, error)
}

// Driver is the VirtualBox driver.
type Driver struct {
	dirs       state.Dirs
	vbm        Runner
	warn       func(string)
	force      bool
	hypervisor func(context.Context) (bool, error)
	handle     func(name string, os config.OS, ip netip.Addr) (*node.Node, error)
	// mu serializes making a cluster's SSH key and a base's
	// registration.
	mu sync.Mutex
}

var (
	_ drivers.Driver          = (*Driver)(nil)
	_ drivers.ImageChecker    = (*Driver)(nil)
	_ drivers.SubnetChecker   = (*Driver)(nil)
	_ drivers.Autostarter     = (*Driver)(nil)
	_ drivers.Installer       = (*Driver)(nil)
	_ drivers.MemoryCommitter = (*Driver)(nil)
)

// New returns a VirtualBox driver.
func New(o Options) *Driver {
	if o.Runner == nil {
		o.Runner = &CLI{}
	}
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	if o.Hypervisor == nil {
		o.Hypervisor = hypervisorPresent
	}
	return &Driver{dirs: o.Dirs, vbm: o.Runner, warn: o.Warn, force: o.Force, hypervisor: o.Hypervisor, handle: o.Handle}
}

// Name implements drivers.Driver.
func (d *Driver) Name() string { return config.DriverVirtualBox }

// StartupMemory implements drivers.MemoryCommitter: VirtualBox gives a
// VM all its memory when it starts.
func (d *Driver) StartupMemory(_ config.OS, memory int64) int64 { return memory }

// GuestOSes implements drivers.Driver.
func (d *Driver) GuestOSes() []config.OS { return config.DriverGuests(config.DriverVirtualBox) }

// run runs VBoxManage; a host without it is the driver unavailable.
func (d *Driver) run(ctx context.Context, args ...string) (string, error) {
	out, err := d.vbm.Run(ctx, args...)
	if errors.Is(err, errNotFound) {
		return "", notInstalled()
	}
	return out, err
}

func notInstalled() error {
	return &drivers.UnavailableError{Driver: config.DriverVirtualBox, Reason: "VBoxManage was not found (VBOX_MSI_INSTALL_PATH, the registry, PATH): VirtualBox is not installed",
		Fix: "install VirtualBox 7.0 or newer from https://www.virtualbox.org/wiki/Downloads (on Windows: `winget install Oracle.VirtualBox`)"}
}

// Files of a cluster and its nodes.
func (d *Driver) clusterFiles(cluster string) string {
	return state.NewStore(d.dirs).DriverDir(cluster, "virtualbox")
}
func (d *Driver) machineDir(r drivers.Ref) string {
	return filepath.Join(d.clusterFiles(r.Cluster), r.Name)
}
func (d *Driver) seedISO(r drivers.Ref) string { return filepath.Join(d.machineDir(r), "cidata.iso") }

// ConsoleLog is the file a node's serial console (COM1) is logged to.
func (d *Driver) ConsoleLog(r drivers.Ref) string {
	return filepath.Join(d.machineDir(r), "console.log")
}
func (d *Driver) paths(r drivers.Ref) vmnode.Paths {
	return vmnode.Paths{
		ClusterKey: filepath.Join(d.clusterFiles(r.Cluster), "id_ed25519"),
		KnownHosts: filepath.Join(d.machineDir(r), "known_hosts"),
	}
}

// NetworkName is the NAT Network of a cluster.
func NetworkName(cluster string) string { return "hwk-" + cluster }

// MAC is a node's NIC address: VirtualBox's own prefix 08:00:27 and the
// last three bytes of the node's IP, unique within a subnet.
func MAC(ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("080027%02X%02X%02X", b[1], b[2], b[3])
}

func colonMAC(ip netip.Addr) string {
	m := strings.ToLower(MAC(ip))
	parts := make([]string, 0, 6)
	for i := 0; i < 12; i += 2 {
		parts = append(parts, m[i:i+2])
	}
	return strings.Join(parts, ":")
}

// vm is a machine as showvminfo --machinereadable reports it.
type vm struct {
	Name  string
	State string
	Meta  *metadata
	// Settings is the VM's .vbox file.
	Settings string
}

// showVM reports the VM named; nil when VirtualBox has none.
func (d *Driver) showVM(ctx context.Context, name string) (*vm, error) {
	out, err := d.run(ctx, "showvminfo", name, "--machinereadable")
	if IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect VM %s: %w", name, err)
	}
	kv := machineReadable(out)
	return &vm{Name: kv["name"], State: kv["VMState"], Meta: parseDescription(kv["description"]), Settings: kv["CfgFile"]}, nil
}

// ours reports whether v is the machine hwk made for r.
func (v *vm) ours(r drivers.Ref) bool {
	return v != nil && v.Meta != nil && v.Meta.Cluster == r.Cluster && v.Meta.Name == r.Name
}

// machineState maps VirtualBox's machine states (MachineState in
// VirtualBox.xidl, as showvminfo names them) to hwk's.
func machineState(s string) drivers.State {
	switch s {
	case "running":
		return drivers.StateRunning
	case "poweroff", "aborted":
		// aborted: the VM process died (or was killed) and the machine
		// is off; it starts as a powered-off one does.
		return drivers.StateStopped
	}
	// saved, paused, starting, stopping, saving, restoring, gurumeditation...
	return drivers.StateOther
}

// off reports whether a VM in state s has no VM process to power off:
// powered off, aborted, or with its state saved to disk.
func off(s string) bool {
	switch s {
	case "poweroff", "aborted", "saved", "aborted-saved":
		return true
	}
	return false
}

func (v *vm) machine() drivers.Machine {
	return drivers.Machine{
		Ref:    drivers.Ref{Cluster: v.Meta.Cluster, Name: v.Meta.Name},
		Role:   v.Meta.Role,
		OS:     v.Meta.OS,
		State:  machineState(v.State),
		Detail: v.State,
		IP:     v.Meta.IP,
	}
}

// Inspect implements drivers.Driver.
func (d *Driver) Inspect(ctx context.Context, r drivers.Ref) (drivers.Machine, error) {
	v, err := d.showVM(ctx, r.Name)
	if err != nil {
		return drivers.Machine{}, err
	}
	if !v.ours(r) {
		return drivers.Machine{Ref: r, State: drivers.StateMissing}, nil
	}
	return v.machine(), nil
}

// List implements drivers.Driver: every VM is asked for its description,
// which names the cluster hwk made it for.
func (d *Driver) List(ctx context.Context, cluster string) ([]drivers.Machine, error) {
	out, err := d.run(ctx, "list", "vms")
	if err != nil {
		return nil, fmt.Errorf("list VirtualBox VMs: %w", err)
	}
	var ms []drivers.Machine
	for _, e := range listVMs(out) {
		// By UUID: names need not be unique in VirtualBox.
		v, err := d.showVM(ctx, e.UUID)
		if err != nil {
			return nil, err
		}
		if v != nil && v.Meta != nil && v.Meta.Cluster == cluster {
			ms = append(ms, v.machine())
		}
	}
	slices.SortFunc(ms, func(a, b drivers.Machine) int { return strings.Compare(a.Name, b.Name) })
	return ms, nil
}

// Start implements drivers.Driver.
func (d *Driver) Start(ctx context.Context, r drivers.Ref) error {
	v, err := d.showVM(ctx, r.Name)
	if err != nil {
		return err
	}
	return d.start(ctx, r, v)
}

// start is Start of the node whose VM showVM found as v.
func (d *Driver) start(ctx context.Context, r drivers.Ref, v *vm) error {
	if !v.ours(r) {
		return fmt.Errorf("node %s of cluster %s has no VirtualBox VM", r.Name, r.Cluster)
	}
	var err error
	switch v.State {
	case "running":
		return nil
	case "paused":
		_, err = d.run(ctx, "controlvm", r.Name, "resume")
	default:
		_, err = d.run(ctx, "startvm", r.Name, "--type", "headless")
	}
	if err != nil {
		return fmt.Errorf("start VM %s: %w", r.Name, err)
	}
	return nil
}

// Stop implements drivers.Driver: the ACPI power button, then, if the
// guest has not shut down within StopGrace, power off.
func (d *Driver) Stop(ctx context.Context, r drivers.Ref) error {
	v, err := d.showVM(ctx, r.Name)
	if err != nil {
		return err
	}
	if !v.ours(r) {
		return fmt.Errorf("node %s of cluster %s has no VirtualBox VM", r.Name, r.Cluster)
	}
	switch {
	case off(v.State):
		return nil
	case v.State == "running":
		if _, err := d.run(ctx, "controlvm", r.Name, "acpipowerbutton"); err != nil {
			return fmt.Errorf("stop VM %s: %w", r.Name, err)
		}
		deadline := time.Now().Add(StopGrace)
		for time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("stop VM %s: %w", r.Name, ctx.Err())
			case <-time.After(pollEvery):
			}
			v, err := d.showVM(ctx, r.Name)
			if err != nil {
				return err
			}
			if v == nil || v.State == "poweroff" {
				return nil
			}
		}
		d.warn(fmt.Sprintf("node %s did not shut down within %s of the ACPI power button; powering it off", r.Name, StopGrace))
	}
	if _, err := d.run(ctx, "controlvm", r.Name, "poweroff"); err != nil {
		return fmt.Errorf("power off VM %s: %w", r.Name, err)
	}
	return nil
}

// SetAutostart implements drivers.Autostarter. VirtualBox starts such VMs
// only where its autostart service is set up (manual, "Starting Virtual
// Machines During System Boot").
func (d *Driver) SetAutostart(ctx context.Context, r drivers.Ref, on bool) error {
	if _, err := d.run(ctx, "modifyvm", r.Name, "--autostart-enabled", onOff(on)); err != nil {
		return fmt.Errorf("autostart of VM %s: %w", r.Name, err)
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// HostEndpoint implements drivers.Driver: the loopback port forwarded to
// the node's port, pinned when the node was made.
func (d *Driver) HostEndpoint(ctx context.Context, r drivers.Ref, port uint16) (netip.AddrPort, error) {
	v, err := d.showVM(ctx, r.Name)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if !v.ours(r) {
		return netip.AddrPort{}, fmt.Errorf("node %s of cluster %s has no VirtualBox VM", r.Name, r.Cluster)
	}
	host, ok := v.Meta.Ports[port]
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("node %s has no host port forwarded to its port %d", r.Name, port)
	}
	return netip.AddrPortFrom(loopback, host), nil
}

var loopback = netip.MustParseAddr("127.0.0.1")

// Node implements drivers.Driver: SSH through the port forwarded to the
// node's port 22, with the cluster's key, accepting only the host key
// pinned for the node.
func (d *Driver) Node(ctx context.Context, r drivers.Ref) (*node.Node, error) {
	v, err := d.showVM(ctx, r.Name)
	if err != nil {
		return nil, err
	}
	if !v.ours(r) {
		return nil, fmt.Errorf("node %s of cluster %s has no VirtualBox VM", r.Name, r.Cluster)
	}
	if v.State != "running" {
		return nil, fmt.Errorf("node %s is %s, not running; start it with `hwk start --name %s`", r.Name, v.State, r.Cluster)
	}
	if d.handle != nil {
		return d.handle(r.Name, v.Meta.OS, v.Meta.IP)
	}
	ssh, ok := v.Meta.Ports[22]
	if !ok {
		return nil, fmt.Errorf("node %s has no host port forwarded to its SSH port", r.Name)
	}
	return vmnode.HandleAt(r.Name, v.Meta.OS, v.Meta.IP, netip.AddrPortFrom(loopback, ssh), d.paths(r))
}

// Delete implements drivers.Driver: the VM if hwk made it for this
// cluster, with its own media (its differencing disk, its seed), its port
// forwards, a base no other node uses any more, and the node's
// directory, so that a VM removed by hand in VirtualBox Manager still
// leaves nothing behind.
func (d *Driver) Delete(ctx context.Context, r drivers.Ref) error {
	v, err := d.showVM(ctx, r.Name)
	if err != nil {
		return err
	}
	return d.delete(ctx, r, v)
}

// delete is Delete of the node whose VM showVM found as v.
func (d *Driver) delete(ctx context.Context, r drivers.Ref, v *vm) error {
	if v.ours(r) {
		if !off(v.State) {
			if _, err := d.run(ctx, "controlvm", r.Name, "poweroff"); err != nil {
				return fmt.Errorf("delete VM %s: power it off: %w", r.Name, err)
			}
		}
		// The VM holds only the node's own media (the base is the
		// differencing disk's parent, never attached), so --delete
		// removes nothing that is not the node's.
		if _, err := d.run(ctx, "unregistervm", r.Name, "--delete"); err != nil && !IsNotFound(err) {
			return fmt.Errorf("delete VM %s: %w", r.Name, err)
		}
	}
	if err := d.closeMedia(ctx, d.machineDir(r)); err != nil {
		return fmt.Errorf("delete node %s: %w", r.Name, err)
	}
	if err := d.removeForwards(ctx, r); err != nil {
		return fmt.Errorf("delete node %s: %w", r.Name, err)
	}
	if err := os.RemoveAll(d.machineDir(r)); err != nil {
		return fmt.Errorf("delete node %s's files: %w", r.Name, err)
	}
	return nil
}

// validate refuses a spec before anything is made.
func (d *Driver) validate(spec drivers.MachineSpec) error {
	if err := drivers.CheckVM(spec, drivers.VMRules{Driver: "virtualbox", Hypervisor: "VirtualBox", Guests: d.GuestOSes(), ImageFormat: "a VDI disk", MinMemory: 512 << 20}); err != nil {
		return err
	}
	if strings.ContainsAny(spec.Name, " \t\"'/\\:") {
		return fmt.Errorf("node %s: a VirtualBox node's name may not hold spaces, quotes, slashes or colons", spec.Name)
	}
	return nil
}

// metadata is what hwk keeps in a VM's description: which cluster's node
// it is, and the host ports forwarded to it. It is one line of key=value
// words, so it reads the same in VirtualBox Manager and needs no escaping
// in showvminfo's output.
type metadata struct {
	Cluster string
	Name    string
	Role    config.Role
	OS      config.OS
	IP      netip.Addr
	// Base is the UUID of the node image's disk the VM's disk is made
	// on.
	Base string
	// Ports maps guest ports to the loopback ports forwarded to them.
	Ports map[uint16]uint16
	// Partial marks a VM whose making has not finished.
	Partial bool
}

const descPrefix = "hwk-node"

func (m metadata) String() string {
	words := []string{descPrefix, "cluster=" + m.Cluster, "name=" + m.Name, "role=" + string(m.Role), "os=" + string(m.OS), "ip=" + m.IP.String(), "base=" + m.Base}
	guest := make([]int, 0, len(m.Ports))
	for g := range m.Ports {
		guest = append(guest, int(g))
	}
	slices.Sort(guest)
	var ports []string
	for _, g := range guest {
		ports = append(ports, fmt.Sprintf("%d:%d", g, m.Ports[uint16(g)]))
	}
	words = append(words, "ports="+strings.Join(ports, ","))
	if m.Partial {
		words = append(words, "partial")
	}
	return strings.Join(words, " ")
}

// parseDescription reads hwk's metadata from a VM's description; nil when
// hwk did not make the VM.
func parseDescription(s string) *metadata {
	words := strings.Fields(s)
	if len(words) == 0 || words[0] != descPrefix {
		return nil
	}
	m := &metadata{Ports: map[uint16]uint16{}}
	for _, w := range words[1:] {
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "cluster":
			m.Cluster = v
		case "name":
			m.Name = v
		case "role":
			m.Role = config.Role(v)
		case "os":
			m.OS = config.OS(v)
		case "ip":
			m.IP, _ = netip.ParseAddr(v)
		case "base":
			m.Base = v
		case "ports":
			for _, p := range strings.Split(v, ",") {
				g, h, ok := strings.Cut(p, ":")
				gi, err1 := strconv.ParseUint(g, 10, 16)
				hi, err2 := strconv.ParseUint(h, 10, 16)
				if ok && err1 == nil && err2 == nil {
					m.Ports[uint16(gi)] = uint16(hi)
				}
			}
		case "partial":
			m.Partial = true
		}
	}
	if m.Cluster == "" || m.Name == "" || !m.IP.IsValid() {
		return nil
	}
	return m
}
