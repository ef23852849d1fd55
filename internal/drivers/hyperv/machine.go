package hyperv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// StopGrace is how long Stop waits for the guest to shut down before it
// turns the VM off, in seconds.
const StopGrace = 60

// Free space Create wants where a node's differencing disk goes: it
// starts small and grows with the node's writes (images, logs).
const (
	minFreeLinux   = 5 << 30
	minFreeWindows = 15 << 30
)

// MAC returns a node's NIC address in Hyper-V's form: Microsoft's Hyper-V
// prefix 00-15-5D and the last three bytes of the node's IP, unique
// within a subnet and readable at a glance.
func MAC(ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("00155D%02X%02X%02X", b[1], b[2], b[3])
}

// colonMAC returns the same address as the seed's network-config writes it.
func colonMAC(ip netip.Addr) string {
	m := strings.ToLower(MAC(ip))
	var parts []string
	for i := 0; i < 12; i += 2 {
		parts = append(parts, m[i:i+2])
	}
	return strings.Join(parts, ":")
}

// metadata is what hwk keeps in a VM's Notes.
type metadata struct {
	Cluster string `json:"cluster"`
	Name    string `json:"name"`
	Role    string `json:"role"`
	OS      string `json:"os"`
	IP      string `json:"ip"`
	// Partial marks a VM whose making has not finished: the create
	// script sets it first and clears it last.
	Partial bool `json:"partial,omitempty"`
}

func (m metadata) notes() string {
	b, _ := json.Marshal(m)
	return notesPrefix + string(b)
}

// parseNotes reads hwk's metadata from a VM's Notes; nil when hwk did not
// make the VM.
func parseNotes(notes string) *metadata {
	rest, ok := strings.CutPrefix(notes, notesPrefix)
	if !ok {
		return nil
	}
	var m metadata
	if json.Unmarshal([]byte(rest), &m) != nil || m.Cluster == "" {
		return nil
	}
	return &m
}

// vmInfo is a VM as the inspect and list scripts report it.
type vmInfo struct {
	Name  string   `json:"name"`
	State string   `json:"state"`
	Notes string   `json:"notes"`
	IPs   []string `json:"ips"`
}

// machineState maps Hyper-V's VM states to hwk's.
func machineState(s string) (drivers.State, string) {
	switch s {
	case "Running":
		return drivers.StateRunning, "running"
	case "Off":
		return drivers.StateStopped, "off"
	}
	// Saved, Paused, Starting, Stopping, Saving, Pausing, Resuming, Reset
	// and the "Other..." states mid-operation.
	return drivers.StateOther, strings.ToLower(s)
}

func (v vmInfo) machine() drivers.Machine {
	m := parseNotes(v.Notes)
	if m == nil {
		return drivers.Machine{Ref: drivers.Ref{Name: v.Name}, State: drivers.StateMissing}
	}
	ip, _ := netip.ParseAddr(m.IP)
	st, detail := machineState(v.State)
	return drivers.Machine{
		Ref:    drivers.Ref{Cluster: m.Cluster, Name: v.Name},
		Role:   config.Role(m.Role),
		OS:     config.OS(m.OS),
		State:  st,
		Detail: detail,
		IP:     ip,
	}
}

// inspect reports the VM named; nil when there is none.
func (d *Driver) inspect(ctx context.Context, name string) (*vmInfo, error) {
	var v *vmInfo
	if err := d.run(ctx, inspectScript(name), &v); err != nil {
		return nil, fmt.Errorf("inspect VM %s: %w", name, err)
	}
	return v, nil
}

// Inspect implements drivers.Driver.
func (d *Driver) Inspect(ctx context.Context, r drivers.Ref) (drivers.Machine, error) {
	v, err := d.inspect(ctx, r.Name)
	if err != nil {
		return drivers.Machine{}, err
	}
	if v == nil {
		return drivers.Machine{Ref: r, State: drivers.StateMissing}, nil
	}
	m := v.machine()
	if m.State == drivers.StateMissing || m.Cluster != r.Cluster {
		return drivers.Machine{Ref: r, State: drivers.StateMissing}, nil
	}
	return m, nil
}

// List implements drivers.Driver.
func (d *Driver) List(ctx context.Context, cluster string) ([]drivers.Machine, error) {
	var vs list[vmInfo]
	if err := d.run(ctx, listScript(), &vs); err != nil {
		return nil, fmt.Errorf("list Hyper-V VMs: %w", err)
	}
	var out []drivers.Machine
	for _, v := range vs {
		if m := v.machine(); m.State != drivers.StateMissing && m.Cluster == cluster {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b drivers.Machine) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Create implements drivers.Driver.
func (d *Driver) Create(ctx context.Context, spec drivers.MachineSpec) error {
	if err := d.validate(spec); err != nil {
		return err
	}
	subnet, err := d.clusterSubnet(spec.Cluster)
	if err != nil {
		return err
	}
	if !subnet.Contains(spec.IP) || spec.IP == subnet.Addr() || spec.IP == (drivers.Network{Subnet: subnet}).Gateway() {
		return fmt.Errorf("node %s: address %s is not a node address of the cluster's subnet %s", spec.Name, spec.IP, subnet)
	}
	if err := d.CheckImage(ctx, spec.Image); err != nil {
		return err
	}
	dir := d.files().Machine(spec.Ref)
	var facts struct {
		Exists bool     `json:"exists"`
		VM     string   `json:"vm"`
		Free   int64    `json:"free"`
		Image  int64    `json:"image"`
		DNS    []string `json:"dns"`
	}
	if err := d.run(ctx, createFactsScript(spec.Name, dir, spec.Image), &facts); err != nil {
		return fmt.Errorf("node %s: %w", spec.Name, err)
	}
	if facts.Exists {
		m := parseNotes(facts.VM)
		if m == nil || m.Cluster != spec.Cluster {
			return &drivers.NameInUseError{Name: spec.Name, Cluster: spec.Cluster, Owner: "Hyper-V VM " + quote(spec.Name),
				Remove: "Hyper-V\\Remove-VM -Name " + quote(spec.Name) + " -Force"}
		}
		why := d.unfit(spec, *m)
		if why == "" {
			// Made to the end for this spec: keep it, as docker and
			// libvirt keep theirs.
			if spec.Start {
				return d.Start(ctx, spec.Ref)
			}
			return nil
		}
		d.warn(fmt.Sprintf("node %s: replacing its Hyper-V VM, %s", spec.Name, why))
		if err := d.run(ctx, deleteScript(spec.Name, dir), nil); err != nil {
			return fmt.Errorf("node %s: remove an earlier attempt: %w", spec.Name, err)
		}
	}
	need := int64(minFreeLinux)
	if spec.OS == config.Windows {
		need = minFreeWindows
	}
	if facts.Free < need {
		return fmt.Errorf("node %s: %d GiB free on the drive of %s, and the node's disk needs at least %d GiB to grow into\n  fix: free some space there, or move hwk's files with HWK_HOME",
			spec.Name, facts.Free>>30, dir, need>>30)
	}
	var dns []netip.Addr
	for _, s := range facts.DNS {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			dns = append(dns, a)
		}
	}
	if len(dns) == 0 {
		return fmt.Errorf("node %s: the host has no IPv4 DNS server on its default route to give the node (hwk's NAT has no DNS of its own)\n  fix: check the host's network connection", spec.Name)
	}
	size, warning := drivers.DiskSize(spec.Name, spec.DiskBytes, facts.Image)
	if warning != "" {
		d.warn(warning)
	}
	// A VHDX holds whole logical sectors (512 or 4096 bytes), which a
	// Kubernetes quantity such as 30G need not be: the disk grows to the
	// next whole MiB.
	grow := int64(0)
	if size > facts.Image {
		grow = (size + 1<<20 - 1) &^ (1<<20 - 1)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("node %s: %w", spec.Name, err)
	}
	seed, err := vmnode.AddIdentity(spec, d.files().Paths(spec.Ref), &d.mu)
	if err != nil {
		return err
	}
	files, err := vmnode.SeedFiles(seed, vmnode.Net{Subnet: subnet, MAC: colonMAC(spec.IP), DNS: dns})
	if err != nil {
		return err
	}
	// The seed holds the node's private host key; it stays in the node's
	// 0700 directory as long as the VM has it attached.
	if err := vmnode.WriteSeedISO(d.seedPath(spec.Ref), files); err != nil {
		return err
	}
	if err := os.Chmod(d.seedPath(spec.Ref), 0o600); err != nil {
		return err
	}
	meta := specMetadata(spec)
	partial := meta
	partial.Partial = true
	var out struct {
		TPM bool `json:"tpm"`
	}
	err = d.run(ctx, createScript(vmSpec{
		Name: spec.Name, Dir: dir, Disk: d.diskPath(spec.Ref), Parent: spec.Image, Seed: d.seedPath(spec.Ref),
		MemoryBytes: spec.MemoryBytes, StartupBytes: startupMemory(spec.OS, spec.MemoryBytes), MinimumBytes: minimumMemory(spec.OS, spec.MemoryBytes),
		CPUs: spec.CPUs, MAC: MAC(spec.IP), DiskBytes: grow, Partial: partial.notes(), Notes: meta.notes(),
		Windows: spec.OS == config.Windows, Start: spec.Start, Autostart: spec.Autostart,
	}), &out)
	if err != nil {
		return fmt.Errorf("create VM %s: %w", spec.Name, err)
	}
	if spec.OS == config.Windows && !out.TPM {
		d.warn(fmt.Sprintf("node %s has no virtual TPM: this host cannot give one (no local key protector); Windows Server runs without it", spec.Name))
	}
	return nil
}

// Dynamic Memory: a node's VM starts with what it needs to boot and run
// its node (Windows more: the OS and its HostProcess containers), gets
// more from Hyper-V as the guest asks, up to the node's memory
// (nodes[].memory), and gives back what it does not use, down to 1 GiB.
const (
	// Why: a 16 GB laptop then starts the default cluster with 5 GiB
	// instead of 10 (review 4, D2).
	startupLinux   = 2 << 30
	startupWindows = 3 << 30
	memoryFloor    = 1 << 30
)

// StartupMemory implements drivers.MemoryCommitter: what Hyper-V must
// have free to start a node's VM, its Dynamic Memory's startup.
func (d *Driver) StartupMemory(os config.OS, memory int64) int64 { return startupMemory(os, memory) }

func startupMemory(os config.OS, memory int64) int64 {
	if os == config.Windows {
		return min(startupWindows, memory)
	}
	return min(startupLinux, memory)
}

// minimumMemory returns the least Hyper-V leaves a node's VM.
func minimumMemory(os config.OS, memory int64) int64 {
	return min(memoryFloor, startupMemory(os, memory))
}

// specMetadata returns the metadata of the VM made for spec.
func specMetadata(spec drivers.MachineSpec) metadata {
	return metadata{Cluster: spec.Cluster, Name: spec.Name, Role: string(spec.Role), OS: string(spec.OS), IP: spec.IP.String()}
}

// unfit returns why the cluster's existing VM m cannot stand for spec, or
// "" when it can: made to the end, for the same node, with its disk and
// seed still in place.
func (d *Driver) unfit(spec drivers.MachineSpec, m metadata) string {
	switch want := specMetadata(spec); {
	case m.Partial:
		return "which an earlier hwk began and did not finish"
	case m != want:
		return fmt.Sprintf("which was made as %s %s node at %s, not %s %s at %s", m.OS, m.Role, m.IP, want.OS, want.Role, want.IP)
	}
	for _, f := range []string{d.diskPath(spec.Ref), d.seedPath(spec.Ref)} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Sprintf("whose file %s is gone", f)
		}
	}
	return ""
}

// validate returns an error for a spec Hyper-V cannot make, before
// anything is made.
func (d *Driver) validate(spec drivers.MachineSpec) error {
	if err := drivers.CheckVM(spec, drivers.VMRules{Driver: "hyperv", Hypervisor: "Hyper-V", Guests: d.GuestOSes(), ImageFormat: "a VHDX disk", MinMemory: 512 << 20}); err != nil {
		return err
	}
	if spec.MemoryBytes%(2<<20) != 0 {
		return fmt.Errorf("node %s: Hyper-V needs memory in multiples of 2 MiB, not %d bytes", spec.Name, spec.MemoryBytes)
	}
	return nil
}

// Start implements drivers.Driver.
func (d *Driver) Start(ctx context.Context, r drivers.Ref) error {
	if err := d.run(ctx, startScript(r.Name), nil); err != nil {
		return fmt.Errorf("start VM %s: %w", r.Name, err)
	}
	return nil
}

// Stop implements drivers.Driver.
func (d *Driver) Stop(ctx context.Context, r drivers.Ref) error {
	if err := d.run(ctx, stopScript(r.Name, StopGrace), nil); err != nil {
		return fmt.Errorf("stop VM %s: %w", r.Name, err)
	}
	return nil
}

// Delete implements drivers.Driver: the VM if hwk made it for this
// cluster, and the node's directory either way, so that a VM removed by
// hand in Hyper-V Manager still leaves nothing behind.
func (d *Driver) Delete(ctx context.Context, r drivers.Ref) error {
	v, err := d.inspect(ctx, r.Name)
	if err != nil {
		return err
	}
	// Only this cluster's VM is removed; a VM removed by hand, or one of
	// the name that is not the cluster's, leaves only the node's files.
	name := ""
	if v != nil {
		if m := parseNotes(v.Notes); m != nil && m.Cluster == r.Cluster {
			name = r.Name
		}
	}
	if err := d.run(ctx, deleteScript(name, d.files().Machine(r)), nil); err != nil {
		return fmt.Errorf("delete VM %s: %w", r.Name, err)
	}
	if err := os.RemoveAll(d.files().Machine(r)); err != nil {
		return fmt.Errorf("delete node %s's files: %w", r.Name, err)
	}
	return nil
}
