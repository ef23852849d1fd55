package virtualbox

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strconv"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

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
	} else if _, err := os.Stat(d.machineDir(spec.Ref)); err == nil {
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
	if err := os.MkdirAll(d.machineDir(spec.Ref), 0o700); err != nil {
		return fmt.Errorf("node %s: %w", spec.Name, err)
	}
	ports, err := drivers.FreeLoopbackPorts(append([]uint16{22}, spec.Ports...))
	if err != nil {
		return fmt.Errorf("node %s: %w", spec.Name, err)
	}
	seed, err := vmnode.AddIdentity(spec, d.paths(spec.Ref), &d.mu)
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
		"--basefolder", d.machineDir(spec.Ref), "--register"); err != nil {
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

// unfit says why the cluster's existing VM m cannot stand for spec; ""
// when it can: made to the end, for the same node, with its files still in
// place.
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
	for _, f := range []string{d.seedISO(spec.Ref), d.paths(spec.Ref).KnownHosts} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Sprintf("whose file %s is gone", f)
		}
	}
	return ""
}
