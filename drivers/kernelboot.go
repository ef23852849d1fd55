package drivers

import (
	"context"
	"io"
)

// KernelBooter is a driver that can start a Linux kernel straight from a
// file in a throwaway VM, with no firmware boot loader and no initramfs,
// and hand back a disk the guest wrote: how hwk configures a Debian root
// on a host that has neither a Docker engine nor WSL 2.
type KernelBooter interface {
	// Name names the hypervisor, for messages.
	Name() string
	// BootKernel starts spec's VM and waits until the guest powers
	// itself off, then calls read with the output disk as the guest left
	// it, then removes the VM and everything made for it. A VM stopped
	// from outside or crashed, a failure or ctx ending is an error (read
	// is not called); the VM is removed then too.
	BootKernel(ctx context.Context, spec KernelBootSpec, read func(out OutputDisk) error) error
	// RemoveBoot removes the VM named name and everything made for it,
	// what a BootKernel that was killed left; nothing there is no error.
	RemoveBoot(ctx context.Context, name string) error
}

// OutputDisk is the disk a kernel-booted guest wrote, read back in a few
// large ranges (each may be one transfer from the hypervisor).
type OutputDisk interface {
	// CopyRange writes length bytes of the disk from offset to w.
	CopyRange(w io.Writer, offset, length int64) error
}

// KernelBootSpec is one VM that boots a kernel directly. Both disks are
// NVMe namespaces, the one disk controller the Debian cloud kernel has
// built in, each with a serial the guest finds it by.
type KernelBootSpec struct {
	// Name names the VM (and what is made for it) on the hypervisor.
	Name string
	// Kernel is the kernel file on the host; Cmdline its command line.
	Kernel, Cmdline string
	// Root is a raw disk file on the host, attached first, with the
	// serial hwk-root. The guest's writes to it are thrown away.
	Root string
	// OutBytes is the size of the second disk, empty at the start, with
	// the serial hwk-out.
	OutBytes    int64
	CPUs        int
	MemoryBytes int64
	// ConsoleLog is a host file the VM's first serial port is logged to.
	ConsoleLog string
}
