package virtualbox

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// StopGrace is how long Stop waits for the guest to shut down after the
// ACPI power button before it powers the VM off.
var StopGrace = 60 * time.Second

// pollEvery is how often Stop and Install look at a VM's state.
var pollEvery = time.Second

// group is the VirtualBox group hwk's VMs are filed under, one subgroup
// per cluster, so that they sit together in VirtualBox Manager.
const group = "/hwk"

// StartupMemory implements drivers.MemoryCommitter: VirtualBox gives a
// VM all its memory when it starts.
func (d *Driver) StartupMemory(_ config.OS, memory int64) int64 { return memory }

// MAC returns a node's NIC address: VirtualBox's own prefix 08:00:27 and the
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

// guest is what differs between Linux and Windows VMs.
type guest struct {
	osType string
	// nicType is a NIC the guest has a driver for out of the box:
	// virtio for Debian; Windows has none for virtio-net, but one for
	// the Intel PRO/1000 MT Desktop.
	nicType string
	// bus and controller are a storage controller the guest boots from
	// and reads the seed DVD on: Debian bookworm's cloud kernel has no
	// AHCI driver but has virtio-scsi (NVMe, which it has too, is in
	// VirtualBox's Extension Pack only, and takes no DVD); Windows has
	// AHCI and no virtio-scsi.
	bus, controller string
	graphics        string
}

func guestFor(os config.OS) guest {
	if os == config.Windows {
		return guest{osType: "Windows2022_64", nicType: "82540EM", bus: "sata", controller: "IntelAhci", graphics: "vboxsvga"}
	}
	return guest{osType: "Debian_64", nicType: "virtio", bus: "virtio", controller: "VirtIO", graphics: "vmsvga"}
}

// controllerName is the storage controller hwk gives its VMs.
const controllerName = "hwk"

// Create implements drivers.Driver.
func (d *Driver) Create(ctx context.Context, spec drivers.MachineSpec) error {
	if err := d.validate(spec); err != nil {
		return err
	}
	if err := d.CheckImage(ctx, spec.Image); err != nil {
		return err
	}
	v, err := d.showVM(ctx, spec.Name)
	if err != nil {
		return err
	}
	if v != nil {
		if v.Meta == nil || v.Meta.Cluster != spec.Cluster || v.Meta.Name != spec.Name {
			return &drivers.NameInUseError{Name: spec.Name, Cluster: spec.Cluster, Owner: fmt.Sprintf("VirtualBox VM %q", spec.Name),
				Remove: fmt.Sprintf("VBoxManage unregistervm %q --delete", spec.Name)}
		}
		why := d.unfit(spec, *v.Meta)
		if why == "" {
			// Made to the end for this spec: keep it, as the other
			// drivers keep theirs.
			if spec.Start {
				return d.start(ctx, spec.Ref, v)
			}
			return nil
		}
		d.warn(fmt.Sprintf("node %s: replacing its VirtualBox VM, %s", spec.Name, why))
		if err := d.delete(ctx, spec.Ref, v); err != nil {
			return fmt.Errorf("node %s: remove an earlier attempt: %w", spec.Name, err)
		}
	} else if _, err := os.Stat(d.files().Machine(spec.Ref)); err == nil {
		// The media and forwards of an attempt that never made its VM.
		if err := d.delete(ctx, spec.Ref, nil); err != nil {
			return fmt.Errorf("node %s: remove an earlier attempt: %w", spec.Name, err)
		}
	}

	nat, err := d.network(ctx, spec.Cluster)
	if err != nil {
		return fmt.Errorf("node %s: %w", spec.Name, err)
	}
	if nat == nil {
		return fmt.Errorf("node %s: cluster %s has no NAT Network %s yet", spec.Name, spec.Cluster, NetworkName(spec.Cluster))
	}
	gw := drivers.Network{Subnet: nat.Subnet}.Gateway()
	if !nat.Subnet.Contains(spec.IP) || spec.IP == nat.Subnet.Addr() || spec.IP == gw {
		return fmt.Errorf("node %s: address %s is not a node address of the cluster's subnet %s", spec.Name, spec.IP, nat.Subnet)
	}
	if err := os.MkdirAll(d.files().Machine(spec.Ref), 0o700); err != nil {
		return fmt.Errorf("node %s: %w", spec.Name, err)
	}
	ports, err := drivers.FreeLoopbackPorts(append([]uint16{22}, spec.Ports...))
	if err != nil {
		return fmt.Errorf("node %s: %w", spec.Name, err)
	}
	seed, err := vmnode.AddIdentity(spec, d.files().Paths(spec.Ref), &d.mu)
	if err != nil {
		return err
	}
	// The NAT Network's own DNS proxy, at its gateway, passes queries to
	// the host's resolver: whatever network the laptop moves to.
	files, err := vmnode.SeedFiles(seed, vmnode.Net{Subnet: nat.Subnet, MAC: colonMAC(spec.IP), DNS: []netip.Addr{gw}})
	if err != nil {
		return err
	}
	// The seed holds the node's private host key: it stays in the node's
	// 0700 directory, 0600.
	if err := vmnode.WriteSeedISO(d.seedISO(spec.Ref), files); err != nil {
		return err
	}
	if err := os.Chmod(d.seedISO(spec.Ref), 0o600); err != nil {
		return err
	}
	base, err := d.ensureBase(spec.Image)
	if err != nil {
		return fmt.Errorf("node %s: %w", spec.Name, err)
	}
	if spec.DiskBytes > base.Capacity {
		// Growing a differencing VDI past its parent leaves reads of the
		// new end to the parent, which refuses them (VDI.cpp vdiRead).
		d.warn(fmt.Sprintf("node %s: its disk stays at the node image's %d GiB (VirtualBox cannot grow a disk made on a shared base)", spec.Name, base.Capacity>>30))
	}
	meta := metadata{Cluster: spec.Cluster, Name: spec.Name, Role: spec.Role, OS: spec.OS, IP: spec.IP, Base: base.UUID, Ports: ports}
	if err := d.createVM(ctx, spec, base, meta); err != nil {
		// What was made goes, so that nothing is left that hwk could not
		// tell as its own (a VM whose description was never written).
		made := &vm{Name: spec.Name, State: "poweroff", Meta: &meta}
		if cerr := d.delete(context.WithoutCancel(ctx), spec.Ref, made); cerr != nil {
			return fmt.Errorf("create VM %s: %w (and removing what was made failed: %v; `hwk down` removes it)", spec.Name, err, cerr)
		}
		return fmt.Errorf("create VM %s: %w", spec.Name, err)
	}
	if spec.Start {
		if _, err := d.run(ctx, "startvm", spec.Name, "--type", "headless"); err != nil {
			return fmt.Errorf("start VM %s: %w", spec.Name, err)
		}
	}
	return nil
}

// createVM makes the node's VM, described as partial until its last
// step. Its disk is the base attached as multi-attach: VirtualBox makes
// the VM a differencing disk of its own on it (in the VM's folder, which is
// the node's directory) and never writes to the base, nor deletes it with
// the VM.
func (d *Driver) createVM(ctx context.Context, spec drivers.MachineSpec, base *medium, meta metadata) error {
	partial := meta
	partial.Partial = true
	g := guestFor(spec.OS)
	if _, err := d.run(ctx, "createvm", "--name", spec.Name, "--groups", group+"/"+spec.Cluster, "--ostype", g.osType,
		"--basefolder", d.files().Machine(spec.Ref), "--register"); err != nil {
		return err
	}
	args := []string{"modifyvm", spec.Name,
		"--description", partial.String(),
		"--memory", strconv.FormatInt(spec.MemoryBytes>>20, 10),
		"--cpus", strconv.Itoa(spec.CPUs),
		"--firmware", "efi",
		"--ioapic", "on",
		"--rtc-use-utc", "on",
		"--graphicscontroller", g.graphics,
		"--audio-enabled", "off",
		"--boot1", "disk", "--boot2", "none", "--boot3", "none", "--boot4", "none",
		"--nic1", "natnetwork", "--nat-network1", NetworkName(spec.Cluster),
		"--nictype1", g.nicType, "--macaddress1", MAC(spec.IP), "--cable-connected1", "on",
		"--uart1", "0x3F8", "4", "--uart-mode1", "file", d.ConsoleLog(spec.Ref),
		"--autostart-enabled", onOff(spec.Autostart),
	}
	if spec.OS == config.Windows {
		args = append(args, "--tpm-type", "2.0")
	}
	if _, err := d.run(ctx, args...); err != nil {
		return err
	}
	if _, err := d.run(ctx, "storagectl", spec.Name, "--name", controllerName, "--add", g.bus, "--controller", g.controller,
		"--portcount", "2", "--bootable", "on"); err != nil {
		return err
	}
	attach := func(port int, typ, medium string, more ...string) error {
		args := append([]string{"storageattach", spec.Name, "--storagectl", controllerName, "--port", strconv.Itoa(port), "--device", "0",
			"--type", typ, "--medium", medium}, more...)
		_, err := d.run(ctx, args...)
		return err
	}
	if err := attach(0, "hdd", base.Location, "--mtype", "multiattach"); err != nil {
		return err
	}
	if err := attach(1, "dvddrive", d.seedISO(spec.Ref)); err != nil {
		return err
	}
	for _, g := range slices.Sorted(maps.Keys(meta.Ports)) {
		h := meta.Ports[g]
		rule := forwardRule{Name: forwardName(spec.Name, g), Host: h, Guest: netip.AddrPortFrom(spec.IP, g)}
		if _, err := d.run(ctx, "natnetwork", "modify", "--netname", NetworkName(spec.Cluster), "--port-forward-4", rule.String()); err != nil {
			return fmt.Errorf("forward 127.0.0.1:%d to its port %d: %w", h, g, err)
		}
	}
	_, err := d.run(ctx, "modifyvm", spec.Name, "--description", meta.String())
	return err
}

// unfit returns why the cluster's existing VM m cannot stand for spec, or
// "" when it can: made to the end, for the same node, with its files still
// in place.
func (d *Driver) unfit(spec drivers.MachineSpec, m metadata) string {
	switch {
	case m.Partial:
		return "which an earlier hwk began and did not finish"
	case m.Role != spec.Role || m.OS != spec.OS || m.IP != spec.IP:
		return fmt.Sprintf("which was made as %s %s node at %s, not %s %s at %s", m.OS, m.Role, m.IP, spec.OS, spec.Role, spec.IP)
	}
	for _, p := range spec.Ports {
		if _, ok := m.Ports[p]; !ok {
			return fmt.Sprintf("which forwards no host port to its port %d", p)
		}
	}
	for _, f := range []string{d.seedISO(spec.Ref), d.files().Paths(spec.Ref).KnownHosts} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Sprintf("whose file %s is gone", f)
		}
	}
	return ""
}

// validate returns an error for a spec VirtualBox cannot make, before
// anything is made.
func (d *Driver) validate(spec drivers.MachineSpec) error {
	if err := drivers.CheckVM(spec, drivers.VMRules{Driver: "virtualbox", Hypervisor: "VirtualBox", Guests: d.GuestOSes(), ImageFormat: "a VDI disk", MinMemory: 512 << 20}); err != nil {
		return err
	}
	if strings.ContainsAny(spec.Name, " \t\"'/\\:") {
		return fmt.Errorf("node %s: a VirtualBox node's name may not hold spaces, quotes, slashes or colons", spec.Name)
	}
	return nil
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

// start starts, as Start does, the node whose VM showVM found as v.
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

// delete deletes, as Delete does, the node whose VM showVM found as v.
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
	if err := d.closeMedia(ctx, d.files().Machine(r)); err != nil {
		return fmt.Errorf("delete node %s: %w", r.Name, err)
	}
	if err := d.removeForwards(ctx, r); err != nil {
		return fmt.Errorf("delete node %s: %w", r.Name, err)
	}
	if err := os.RemoveAll(d.files().Machine(r)); err != nil {
		return fmt.Errorf("delete node %s's files: %w", r.Name, err)
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
