// Package diskimage turns a node rootfs into the VM disk formats hwk's
// drivers boot (qcow2 for libvirt, VHDX for Hyper-V, VDI for VirtualBox),
// reads their headers back, and boot-tests a disk under QEMU.
//
// WriteRawDisk writes a bootable raw GPT disk from a tar stream of the
// rootfs, in Go (github.com/diskfs/go-diskfs), with no tool and no root, on
// any OS; WriteQCOW2, WriteVDI and WriteVHDX turn it into qcow2, VDI or
// VHDX, reading only its data. The node image build makes its disks with
// these four. Info and BootCheck need qemu-img and QEMU at run time.
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

// QemuImg returns where qemu-img is installed, or an error that tells how
// to install it.
func QemuImg() (string, error) {
	return hostexec.LookPath("qemu-img", "Debian/Ubuntu: apt-get install qemu-utils; Windows: install QEMU for Windows and put its folder on PATH")
}
