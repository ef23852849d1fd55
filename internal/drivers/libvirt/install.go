package libvirt

import (
	"context"
	"fmt"
	"os"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

var _ drivers.Installer = (*Driver)(nil)

// InstallFormat implements drivers.Installer.
func (d *Driver) InstallFormat() string { return "qcow2" }

// keySpace is the space bar in the Linux keycode set (codeset 0 of
// virDomainSendKey), what answers "Press any key to boot from CD or DVD".
const keySpace = 57

// installPoll is how often Install looks at the VM.
var installPoll = 2 * time.Second

// installDisk, installMedium and installNVRAM return the names of what
// Install makes in the pool.
func installDisk(name string) string          { return "install_" + name + ".qcow2" }
func installMedium(name string, i int) string { return fmt.Sprintf("install_%s_%d.iso", name, i) }
func installNVRAM(name string) string         { return "install_" + name + "_VARS.fd" }

// Install implements drivers.Installer: the media and an empty qcow2 go
// into hwk's pool (QEMU cannot read the user's files), the domain boots
// from the first medium, and when the guest has powered itself off the
// disk is streamed back out of the pool to spec.Disk.
func (d *Driver) Install(ctx context.Context, spec drivers.InstallSpec) error {
	if len(spec.Media) == 0 || spec.Disk == "" || spec.DiskBytes <= 0 || spec.CPUs < 1 || spec.MemoryBytes < 512<<20 {
		return fmt.Errorf("install %s: needs media, a disk, CPUs and at least 512 MiB of memory", spec.Name)
	}
	l, a, pool, err := d.buildSession(ctx)
	if err != nil {
		return err
	}
	defer l.Disconnect()
	// Leftovers of an install that was interrupted go first; everything
	// goes at the end, whatever happened.
	cleanup := func() error {
		if err := removeDomain(l, spec.Name); err != nil {
			return err
		}
		names := []string{installDisk(spec.Name)}
		for i := range spec.Media {
			names = append(names, installMedium(spec.Name, i))
		}
		for _, n := range names {
			if err := deleteVolume(l, pool, n); err != nil {
				return err
			}
		}
		return nil
	}
	if err := cleanup(); err != nil {
		return fmt.Errorf("install %s: remove an earlier attempt: %w", spec.Name, err)
	}
	defer func() { _ = cleanup() }()

	var media []string
	for i, m := range spec.Media {
		p, err := uploadFile(l, pool, installMedium(spec.Name, i), "raw", m, nil)
		if err != nil {
			return fmt.Errorf("install %s: %w", spec.Name, err)
		}
		media = append(media, p)
	}
	xml, err := volumeXML(installDisk(spec.Name), "qcow2", uint64(spec.DiskBytes), "")
	if err != nil {
		return err
	}
	vol, disk, err := createVolume(l, pool, xml)
	if err != nil {
		return fmt.Errorf("install %s: create its disk: %w", spec.Name, err)
	}
	domXML, err := installDomainXML(spec, a.KVM, disk, media, poolDir+"/"+installNVRAM(spec.Name))
	if err != nil {
		return err
	}
	dom, err := startVM(l, domXML, "install "+spec.Name)
	if err != nil {
		return err
	}
	if spec.PressKey {
		// The prompt shows once firmware has found the medium, seconds in
		// with KVM and later under TCG; a key pressed before it is lost,
		// so keep pressing through the window it can appear in.
		window := 40 * time.Second
		if !a.KVM {
			window = 3 * time.Minute
		}
		go pressKeys(ctx, l, dom, window)
	}
	if err := waitPoweroff(ctx, l, dom, "install "+spec.Name, spec.ConsoleLog); err != nil {
		return err
	}
	return download(l, vol, spec.Disk)
}

// buildSession connects for a throwaway build VM (an install, a booted
// kernel): the connection, how QEMU runs here, and hwk's pool.
func (d *Driver) buildSession(ctx context.Context) (*golibvirt.Libvirt, accel, golibvirt.StoragePool, error) {
	l, err := d.connect()
	if err != nil {
		return nil, accel{}, golibvirt.StoragePool{}, err
	}
	a, _, err := d.accel.get(ctx, l, true)
	if err == nil {
		var pool golibvirt.StoragePool
		if pool, err = ensurePool(l); err == nil {
			return l, a, pool, nil
		}
	} else {
		err = accelError(err)
	}
	_ = l.Disconnect()
	return nil, accel{}, golibvirt.StoragePool{}, err
}

// buildDomain returns a throwaway build VM of hwk's (an install, a booted
// kernel) with what both have: TCG or KVM, memory and CPUs, ACPI and
// APIC, and a power-off or crash that ends it.
func buildDomain(name string, kvm bool, cpus int, memory int64) *libvirtxml.Domain {
	typ, cpu := virtCPU(kvm)
	return &libvirtxml.Domain{
		Type:        typ,
		Name:        name,
		Description: "hwk node image build " + name,
		Memory:      &libvirtxml.DomainMemory{Value: uint(memory >> 20), Unit: "MiB"},
		VCPU:        &libvirtxml.DomainVCPU{Value: uint(cpus)},
		CPU:         cpu,
		Features: &libvirtxml.DomainFeatureList{
			ACPI: &libvirtxml.DomainFeature{},
			APIC: &libvirtxml.DomainFeatureAPIC{},
		},
		OnPoweroff: "destroy",
		OnCrash:    "destroy",
	}
}

// createVolume makes the volume xml describes and returns it and its path.
func createVolume(l *golibvirt.Libvirt, pool golibvirt.StoragePool, xml string) (golibvirt.StorageVol, string, error) {
	vol, err := l.StorageVolCreateXML(pool, xml, 0)
	if err != nil {
		return vol, "", err
	}
	p, err := l.StorageVolGetPath(vol)
	return vol, p, err
}

// startVM defines and starts the domain domXML describes; what names its
// job in messages.
func startVM(l *golibvirt.Libvirt, domXML, what string) (golibvirt.Domain, error) {
	dom, err := l.DomainDefineXML(domXML)
	if err != nil {
		return dom, fmt.Errorf("%s: define the VM: %w", what, err)
	}
	if err := l.DomainCreate(dom); err != nil {
		return dom, fmt.Errorf("%s: start the VM: %s", what, libvirtMessage(err))
	}
	return dom, nil
}

// pressKeys presses the space bar every second for window, or until ctx
// ends or the domain is gone.
func pressKeys(ctx context.Context, l *golibvirt.Libvirt, dom golibvirt.Domain, window time.Duration) {
	deadline := time.Now().Add(window)
	for time.Now().Before(deadline) {
		if err := l.DomainSendKey(dom, 0, 50, []uint32{keySpace}, 0); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// waitPoweroff waits for the guest to power off by itself: the end of an
// unattended install or a build VM. Any other way of stopping is a
// failure; what names the VM's job in messages.
func waitPoweroff(ctx context.Context, l *golibvirt.Libvirt, dom golibvirt.Domain, what, console string) error {
	for {
		st, reason, err := l.DomainGetState(dom, 0)
		if err != nil {
			return fmt.Errorf("%s: the VM: %w", what, err)
		}
		if golibvirt.DomainState(st) == golibvirt.DomainShutoff {
			if golibvirt.DomainShutoffReason(reason) == golibvirt.DomainShutoffShutdown {
				return nil
			}
			return fmt.Errorf("%s: the VM stopped without the guest powering it off (%s); its console is in %s", what, shutoffReason(reason), console)
		}
		if golibvirt.DomainState(st) == golibvirt.DomainCrashed {
			return fmt.Errorf("%s: the VM crashed; its console is in %s", what, console)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(installPoll):
		}
	}
}

func shutoffReason(r int32) string {
	switch golibvirt.DomainShutoffReason(r) {
	case golibvirt.DomainShutoffDestroyed:
		return "destroyed: someone turned it off"
	case golibvirt.DomainShutoffCrashed:
		return "crashed"
	case golibvirt.DomainShutoffFailed:
		return "QEMU failed"
	}
	return fmt.Sprintf("reason %d", r)
}

// uploadFile streams a host file into the pool as volume name, in
// format, owned by owner when there is one (see ownedVolumeXML), and
// returns the volume's path.
func uploadFile(l *golibvirt.Libvirt, pool golibvirt.StoragePool, name, format, path string, owner *dacOwner) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	xml, err := ownedVolumeXML(name, format, uint64(fi.Size()), owner, "0600")
	if err != nil {
		return "", err
	}
	return uploadAs(l, pool, name, xml, f, fi.Size())
}

// download streams a volume's file (the qcow2 itself, not the disk it
// holds) to path, atomically.
func download(l *golibvirt.Libvirt, vol golibvirt.StorageVol, path string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = l.StorageVolDownload(vol, f, 0, 0, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("copy the installed disk out of the pool: %w", err)
	}
	return os.Rename(tmp, path)
}

// installDomainXML returns the install VM: a Windows-style machine (see
// domainXML) with no network (the guest downloads nothing), the empty
// disk, the media as SATA CD-ROMs, and a boot order that tries the first
// medium before the disk. Windows media then boot only when a key is
// pressed, so the reboots of an install go to the disk by themselves.
func installDomainXML(spec drivers.InstallSpec, kvm bool, disk string, media []string, nvram string) (string, error) {
	d := buildDomain(spec.Name, kvm, spec.CPUs, spec.MemoryBytes)
	d.OS = uefi(nvram)
	d.OnReboot = "restart"
	d.Devices = &libvirtxml.DomainDeviceList{
		Disks: []libvirtxml.DomainDisk{{
			Device: "disk",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2", Discard: "unmap"},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: disk}},
			Target: &libvirtxml.DomainDiskTarget{Dev: "sda", Bus: "sata"},
			Boot:   &libvirtxml.DomainDeviceBoot{Order: uint(len(media) + 1)},
		}},
	}
	consoleAndRNG(d.Devices, spec.ConsoleLog)
	for i, m := range media {
		cd := libvirtxml.DomainDisk{
			Device:   "cdrom",
			Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
			Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: m}},
			Target:   &libvirtxml.DomainDiskTarget{Dev: fmt.Sprintf("sd%c", 'b'+i), Bus: "sata"},
			ReadOnly: &libvirtxml.DomainDiskReadOnly{},
		}
		if i == 0 {
			cd.Boot = &libvirtxml.DomainDeviceBoot{Order: 1}
		}
		d.Devices.Disks = append(d.Devices.Disks, cd)
	}
	windows(d, domainSpec{MachineSpec: drivers.MachineSpec{OS: config.Windows}, KVM: kvm})
	return d.Marshal()
}
