package drivers

import "context"

// Installer is a driver that can run an operating system's installer in a
// throwaway VM and keep the disk it leaves: how hwk makes the Windows node
// image, whose install cannot be done anywhere except in a VM.
type Installer interface {
	// InstallFormat is the disk format Install writes: qcow2 (libvirt),
	// vhdx (Hyper-V), vdi (VirtualBox).
	InstallFormat() string
	// Install boots a VM from spec.Media onto a new empty disk and waits
	// until the guest powers itself off, then writes that disk to
	// spec.Disk and removes the VM and everything made for it. A VM
	// stopped from outside, a failure or ctx ending is an error; the VM
	// is removed then too.
	Install(ctx context.Context, spec InstallSpec) error
}

// InstallSpec is one install VM.
type InstallSpec struct {
	// Name names the VM (and what is made for it) on the hypervisor.
	Name string
	// Media are ISO files on the host, attached as CD-ROMs in this order;
	// the VM boots from the first (UEFI).
	Media []string
	// PressKey reports whether the first medium's boot loader waits for a
	// key press ("Press any key to boot from CD or DVD", Windows media):
	// the driver presses one while the VM starts.
	PressKey bool
	// Disk is the host file to write the installed disk to, in
	// InstallFormat; DiskBytes its virtual size.
	Disk      string
	DiskBytes int64
	CPUs      int
	// MemoryBytes is the VM's memory.
	MemoryBytes int64
	// ConsoleLog is a host file the VM's first serial port (COM1) is
	// logged to, so the caller can follow the guest.
	ConsoleLog string
}
