// Package diskimage turns a node rootfs into the VM disk formats hwk's
// drivers boot (qcow2 for libvirt, VHDX for Hyper-V, VDI for VirtualBox),
// reads their headers back, and boot-tests a disk under QEMU.
//
// WriteRawDisk writes the raw GPT disk in Go (github.com/diskfs/go-diskfs)
// from a tar stream of the rootfs, never unpacked on the host: an EFI
// system partition with systemd-boot, the kernel and the initramfs, then
// an ext4 root named by PARTUUID. It needs no tool and no root, on any OS.
// What of a tar it cannot put in the ext4 (hard links become copies;
// device nodes outside /dev, most extended attributes and a path given
// twice are errors) is listed at writeRoot.
//
// WriteQCOW2, WriteVDI and WriteVHDX turn that raw disk into qcow2, VDI or
// VHDX in Go, reading only its data. The node image build
// (pkg/nodeimage) makes its disks with these four.
//
// The package compiles everywhere. Info and BootCheck run qemu-img and
// QEMU, and need them at run time.
package diskimage

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hwk-dev/hwk/internal/hostexec"
)

// tailLines is how much of QEMU's output a failed BootCheck quotes.
const tailLines = 20

// Info reads a disk image's format and virtual size (in bytes) with
// qemu-img info.
func Info(ctx context.Context, path string) (format string, virtualSize int64, err error) {
	qemuImg, err := QemuImg()
	if err != nil {
		return "", 0, fmt.Errorf("disk image info: %w", err)
	}
	out, err := hostexec.Output(hostexec.Command(ctx, qemuImg, "info", "--output=json", path))
	if err != nil {
		return "", 0, fmt.Errorf("disk image info: %w", err)
	}
	var info struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return "", 0, fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	return info.Format, info.VirtualSize, nil
}

// QemuImg returns where qemu-img is installed, or an error that says how
// to install it.
func QemuImg() (string, error) {
	return hostexec.LookPath("qemu-img", "Debian/Ubuntu: apt-get install qemu-utils; Windows: install QEMU for Windows and put its folder on PATH")
}
