package diskimage

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/google/uuid"

	"github.com/hwk-dev/hwk/internal/state"
)

// DefaultESPMiB is the EFI system partition's size unless asked otherwise:
// room for a few kernel and initramfs pairs.
const DefaultESPMiB = 256

// minESPMiB is the smallest ESP: FAT32 needs 65525 clusters, 33 MiB at
// 512-byte clusters.
const minESPMiB = 34

// minRootMiB is the smallest root partition WriteRawDisk makes.
const minRootMiB = 64

// The partitions' GPT names and file system labels.
const (
	espName  = "EFI system partition"
	rootName = "hwk-root"
	espLabel = "HWK-ESP"
	// rootLabel is the ext4 volume label.
	rootLabel = "hwk-root"
)

const mibBytes = 1 << 20

// RawDiskOptions are WriteRawDisk's settings.
type RawDiskOptions struct {
	// Size is the disk's size in bytes, rounded down to a whole MiB.
	Size int64
	// ESPMiB is the EFI system partition's size; 0 means DefaultESPMiB.
	ESPMiB int
	// CmdlineExtra is appended to the kernel command line hwk's boot
	// entry gives (root=PARTUUID=… rw console=tty0 console=ttyS0,115200).
	CmdlineExtra string
	// NoBoot leaves the ESP unformatted and the root without a boot
	// loader, kernel or initramfs requirement: for a hypervisor that
	// starts a kernel of its own directly (root=PARTUUID=RootPartUUID).
	NoBoot bool
}

// RawDisk describes a disk WriteRawDisk made.
type RawDisk struct {
	// Path is the raw disk file.
	Path string
	// Size is its size in bytes (a whole number of MiB).
	Size int64
	// RootPartUUID is partition 2's unique GUID, lower case, as the boot
	// entry names it in root=PARTUUID=.
	RootPartUUID string
	// KernelVersion is what follows vmlinuz- in the kernel's name; empty
	// for a kernel named otherwise.
	KernelVersion string
	// Kernel and Initrd are the rootfs paths the ESP's copies came from.
	Kernel, Initrd string
	// Counts of what the root file system got from the tar.
	Dirs, Files, Symlinks int
	// HardLinkCopies counts hard links written as copies of their target.
	HardLinkCopies int
	// SkippedDevices counts device nodes and FIFOs under /dev left out.
	SkippedDevices int
	// DroppedXattrs lists, per file, which extended attribute was not
	// written and what was done instead (see xattrFallback).
	DroppedXattrs []string
}

// layout is the disk's partitioning in MiB: the primary GPT in the first
// MiB, the ESP, the root partition, and a last MiB left for the backup GPT
// (33 sectors) so the root partition stays whole MiB and every partition
// starts 1 MiB-aligned.
type layout struct {
	diskMiB, espStart, espMiB, rootStart, rootMiB int64
}

func newLayout(size int64, espMiB int) (layout, error) {
	if espMiB == 0 {
		espMiB = DefaultESPMiB
	}
	if espMiB < minESPMiB {
		return layout{}, fmt.Errorf("an EFI system partition of %d MiB is too small: FAT32 needs at least %d MiB", espMiB, minESPMiB)
	}
	l := layout{diskMiB: size / mibBytes, espStart: 1, espMiB: int64(espMiB)}
	l.rootStart = l.espStart + l.espMiB
	l.rootMiB = l.diskMiB - l.rootStart - 1
	if l.rootMiB < minRootMiB {
		return layout{}, fmt.Errorf("a disk of %d bytes leaves no room for the root file system: give at least %d bytes", size, (l.rootStart+minRootMiB+1)*mibBytes)
	}
	return l, nil
}

func (l layout) table(rootPartUUID string) *gpt.Table {
	const sectorsPerMiB = mibBytes / 512
	part := func(index int, startMiB, sizeMiB int64, typ gpt.Type, name, guid string) *gpt.Partition {
		return &gpt.Partition{
			Index: index,
			Start: uint64(startMiB * sectorsPerMiB),
			End:   uint64((startMiB+sizeMiB)*sectorsPerMiB - 1),
			Size:  uint64(sizeMiB * mibBytes),
			Type:  typ,
			Name:  name,
			GUID:  guid,
		}
	}
	return &gpt.Table{
		LogicalSectorSize:  512,
		PhysicalSectorSize: 512,
		ProtectiveMBR:      true,
		Partitions: []*gpt.Partition{
			part(1, l.espStart, l.espMiB, gpt.EFISystemPartition, espName, ""),
			part(2, l.rootStart, l.rootMiB, gpt.LinuxRootX86_64, rootName, rootPartUUID),
		},
	}
}

// WriteRawDisk writes out, a sparse, bootable GPT/UEFI raw disk: an ESP
// with systemd-boot and rootfs's kernel, then an ext4 root holding rootfs,
// a tar stream of a node's root file system read once (a pipe will do). It
// needs no tool and no root on any OS; see writeRoot for what of a tar it
// cannot hold. On error out is not left behind.
func WriteRawDisk(ctx context.Context, rootfs io.Reader, out string, opts RawDiskOptions) (*RawDisk, error) {
	// The disk: partition 1 is an EFI system partition (FAT32, label
	// HWK-ESP) with systemd-boot as \EFI\BOOT\BOOTX64.EFI, a loader entry
	// and the rootfs's kernel and initramfs; partition 2, which runs to the
	// disk's last MiB, is the ext4 root (GPT type x86-64 root, label
	// hwk-root, with a journal) holding the tar's files, with a PARTUUID
	// chosen here (see layout). Owners and modes come from the tar
	// headers: nothing is mounted, no tool runs, and the tar is never
	// unpacked on the host.
	l, err := newLayout(opts.Size, opts.ESPMiB)
	if err != nil {
		return nil, fmt.Errorf("write disk %s: %w", out, err)
	}
	rootPartUUID := uuid.NewString()

	var res *RawDisk
	// A disk is as readable as the other build outputs (a hypervisor's
	// user may need to read it). state.WriteOutput writes under a
	// temporary name beside out and renames it at the end.
	err = state.WriteOutput(out, 0o644, func(f *os.File) error {
		disk, err := newSparseFile(f, l.diskMiB*mibBytes)
		if err != nil {
			return err
		}
		if err := l.table(rootPartUUID).Write(disk, disk.size); err != nil {
			return fmt.Errorf("partition table: %w", err)
		}
		res = &RawDisk{Path: out, Size: disk.size, RootPartUUID: rootPartUUID}
		idx, err := writeRoot(ctx, disk, l.rootStart*mibBytes, l.rootMiB*mibBytes, rootfs, res)
		if err != nil {
			return fmt.Errorf("root file system: %w", err)
		}
		if opts.NoBoot {
			return nil
		}
		// Why the kernel, initramfs and systemd-boot are picked only at
		// the tar's end and read back from the root file system: a symlink
		// anywhere in the tar may change the pick, and the root already
		// holds every candidate. That needs no second pass over the input,
		// which a pipe cannot give, and no spool: buffering the candidates
		// while streaming would mean every kernel and initramfs in /boot
		// (tens of MiB each) in memory or a scratch directory.
		if err := writeESP(disk, l.espStart*mibBytes, l.espMiB*mibBytes, idx, bootEntry{partUUID: rootPartUUID, extra: opts.CmdlineExtra}, res); err != nil {
			return fmt.Errorf("EFI system partition: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("write disk %s: %w", out, err)
	}
	return res, nil
}

// bootEntry is what the loader entry's command line holds.
type bootEntry struct {
	partUUID, extra string
}

func (b bootEntry) cmdline() string {
	// The last console= is /dev/console, where systemd writes its status:
	// the serial port, which every hypervisor can log and hwk reads.
	// PARTUUID rather than the file system's UUID: the kernel resolves it
	// itself, initramfs or not.
	c := "root=PARTUUID=" + b.partUUID + " rw console=tty0 console=ttyS0,115200"
	if extra := strings.TrimSpace(b.extra); extra != "" {
		c += " " + extra
	}
	return c
}
