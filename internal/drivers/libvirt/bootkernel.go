package libvirt

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/format/diskimage"
)

var _ drivers.KernelBooter = (*Driver)(nil)

// bootNames returns the volumes BootKernel makes in the pool for VM name:
// the kernel, the root and the output disk.
func bootNames(name string) []string {
	return []string{name + "_vmlinuz", name + "_root.qcow2", name + "_out.raw"}
}

// RemoveBoot implements drivers.KernelBooter.
func (d *Driver) RemoveBoot(_ context.Context, name string) error {
	return d.with(func(l *golibvirt.Libvirt) error {
		pool, err := ensurePool(l)
		if err != nil {
			return err
		}
		return removeBoot(l, pool, name)
	})
}

// removeBoot removes build VM name (stopped first) and its volumes.
func removeBoot(l *golibvirt.Libvirt, pool golibvirt.StoragePool, name string) error {
	if err := removeDomain(l, name); err != nil {
		return err
	}
	for _, n := range bootNames(name) {
		if err := deleteVolume(l, pool, n); err != nil {
			return err
		}
	}
	return nil
}

// BootKernel implements drivers.KernelBooter: it uploads the kernel and the
// root (as a qcow2) into hwk's pool, makes the output disk there, boots the
// VM with the disks as QEMU NVMe devices, and reads the output disk back
// from its file.
func (d *Driver) BootKernel(ctx context.Context, spec drivers.KernelBootSpec, read func(out drivers.OutputDisk) error) error {
	if spec.Name == "" || spec.Kernel == "" || spec.Root == "" || spec.OutBytes <= 0 || spec.CPUs < 1 || spec.MemoryBytes < 256<<20 {
		return fmt.Errorf("boot %s: needs a kernel, a root disk, an output disk, CPUs and at least 256 MiB of memory", spec.Name)
	}
	l, a, pool, err := d.buildSession(ctx)
	if err != nil {
		return err
	}
	defer l.Disconnect()
	// Why the owner: libvirt 9 has no NVMe disk bus (its targets are ide,
	// sata, scsi, virtio, usb...), so the disks are QEMU devices of the
	// domain's qemu:commandline, and their volumes are made owned by the
	// user QEMU runs as, which libvirt would otherwise arrange only for
	// disks it knows of.
	owner, err := qemuOwner(l, a.KVM)
	if err != nil {
		return fmt.Errorf("boot %s: %w", spec.Name, err)
	}
	names := bootNames(spec.Name)
	if err := removeBoot(l, pool, spec.Name); err != nil {
		return fmt.Errorf("boot %s: remove an earlier attempt: %w", spec.Name, err)
	}
	defer func() { _ = removeBoot(l, pool, spec.Name) }()

	// Why upload: QEMU cannot read the user's files. The root goes as a
	// qcow2 written in Go, so only its data crosses the socket.
	kernel, err := uploadFile(l, pool, names[0], "raw", spec.Kernel, owner)
	if err != nil {
		return fmt.Errorf("boot %s: %w", spec.Name, err)
	}
	qcow := spec.Root + ".qcow2"
	if err := diskimage.WriteQCOW2(ctx, spec.Root, qcow); err != nil {
		return fmt.Errorf("boot %s: %w", spec.Name, err)
	}
	root, err := uploadFile(l, pool, names[1], "qcow2", qcow, owner)
	os.Remove(qcow)
	if err != nil {
		return fmt.Errorf("boot %s: %w", spec.Name, err)
	}
	// Readable by all: hwk reads the guest's output straight from the
	// pool's file (see outputDisk), and the output is the node image,
	// which holds no secret (configure.sh removes the SSH host keys its
	// packages make).
	xml, err := ownedVolumeXML(names[2], "raw", uint64(spec.OutBytes), owner, "0644")
	if err != nil {
		return err
	}
	_, out, err := createVolume(l, pool, xml)
	if err != nil {
		return fmt.Errorf("boot %s: create the output disk: %w", spec.Name, err)
	}
	domXML, err := bootKernelXML(spec, a.KVM, kernel, root, out)
	if err != nil {
		return err
	}
	dom, err := startVM(l, domXML, "boot "+spec.Name)
	if err != nil {
		return err
	}
	if err := waitPoweroff(ctx, l, dom, "boot "+spec.Name, spec.ConsoleLog); err != nil {
		return err
	}
	return read(outputDisk{path: out})
}

// bootKernelXML returns the VM's domain XML: the kernel started directly,
// no network, the console, and the two disks as NVMe controllers of QEMU's
// own. Any way of stopping except the guest powering off ends the domain.
func bootKernelXML(spec drivers.KernelBootSpec, kvm bool, kernel, root, out string) (string, error) {
	d := buildDomain(spec.Name, kvm, spec.CPUs, spec.MemoryBytes)
	// No firmware boot loader: SeaBIOS hands over to the kernel.
	d.OS = &libvirtxml.DomainOS{
		Type:    &libvirtxml.DomainOSType{Arch: "x86_64", Machine: "q35", Type: "hvm"},
		Kernel:  kernel,
		Cmdline: spec.Cmdline,
	}
	d.OnReboot = "destroy" // so a panic (panic=-1 reboots) is seen as a stop
	d.Devices = &libvirtxml.DomainDeviceList{}
	d.QEMUCommandline = &libvirtxml.DomainQEMUCommandline{Args: qemuArgs(
		// cache=unsafe: the root is thrown away, and flushes cost.
		"-drive", "file="+qemuOpt(root)+",format=qcow2,if=none,id=hwkroot,cache=unsafe",
		// Root-complex slots libvirt does not hand out (it fills slots
		// from 1 up).
		"-device", "nvme,drive=hwkroot,serial=hwk-root,bus=pcie.0,addr=0x18",
		"-drive", "file="+qemuOpt(out)+",format=raw,if=none,id=hwkout",
		"-device", "nvme,drive=hwkout,serial=hwk-out,bus=pcie.0,addr=0x19",
	)}
	consoleAndRNG(d.Devices, spec.ConsoleLog)
	return d.Marshal()
}

func qemuArgs(args ...string) []libvirtxml.DomainQEMUCommandlineArg {
	out := make([]libvirtxml.DomainQEMUCommandlineArg, len(args))
	for i, a := range args {
		out[i].Value = a
	}
	return out
}

// qemuOpt escapes a value for QEMU's option syntax: a comma is doubled.
func qemuOpt(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// dacOwner is the user and group QEMU runs as, from the host's DAC
// security model ("+64055:+64055"); nil where libvirt does not change
// it (QEMU as root, or a session libvirt).
type dacOwner struct{ uid, gid string }

// qemuOwner reads the DAC base label of the domain type from the host's
// capabilities.
func qemuOwner(l *golibvirt.Libvirt, kvm bool) (*dacOwner, error) {
	raw, err := l.ConnectGetCapabilities()
	if err != nil {
		return nil, fmt.Errorf("host capabilities: %w", err)
	}
	var caps libvirtxml.Caps
	if err := caps.Unmarshal(raw); err != nil {
		return nil, fmt.Errorf("host capabilities: %w", err)
	}
	typ, _ := virtCPU(kvm)
	for _, m := range caps.Host.SecModel {
		if m.Name != "dac" {
			continue
		}
		for _, lb := range m.Labels {
			if lb.Type != typ {
				continue
			}
			uid, gid, ok := strings.Cut(strings.TrimSpace(lb.Value), ":")
			if !ok {
				return nil, fmt.Errorf("host capabilities: DAC label %q is not uid:gid", lb.Value)
			}
			return &dacOwner{uid: strings.TrimPrefix(uid, "+"), gid: strings.TrimPrefix(gid, "+")}, nil
		}
	}
	return nil, nil
}

// ownedVolumeXML returns volume name, owned by owner when there is one, with
// mode.
func ownedVolumeXML(name, format string, capacity uint64, owner *dacOwner, mode string) (string, error) {
	v := &libvirtxml.StorageVolume{
		Name:     name,
		Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: capacity},
		Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: format}},
	}
	if owner != nil {
		v.Target.Permissions = &libvirtxml.StorageVolumeTargetPermissions{Owner: owner.uid, Group: owner.gid, Mode: mode}
	}
	return v.Marshal()
}

// outputDisk reads the output volume from its file in the pool, which
// libvirt on this host made readable to all (BootKernel), not through a
// libvirt stream.
type outputDisk struct {
	// Why not a stream: go-libvirt's stream end can deadlock, the reply
	// that ends a stream racing the caller's deregistration
	// (digitalocean/go-libvirt#241, open), which hung this very read here
	// once in a few dozen downloads.
	path string
}

func (o outputDisk) CopyRange(w io.Writer, offset, length int64) error {
	f, err := os.Open(o.path)
	if err != nil {
		return fmt.Errorf("read the build VM's output disk: %w (hwk reads it in libvirt's pool directory, %s)", err, poolDir)
	}
	defer f.Close()
	if _, err := io.Copy(w, io.NewSectionReader(f, offset, length)); err != nil {
		return fmt.Errorf("read %d bytes at %d of the build VM's output disk: %w", length, offset, err)
	}
	return nil
}
