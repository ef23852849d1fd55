package libvirt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Preflight implements drivers.Driver: libvirt answers, QEMU can boot
// UEFI guests, and KVM is used if a guest really runs under it.
func (d *Driver) Preflight(ctx context.Context) (string, error) {
	drivers.Waiting(ctx, "libvirtd")
	return withConn(d, func(l *golibvirt.Libvirt) (string, error) {
		a, h, err := d.accel.get(ctx, l, false)
		if err != nil {
			return "", accelError(err)
		}
		detail := fmt.Sprintf("libvirt %s, QEMU %s, ", h.Libvirt, h.QEMU)
		if a.KVM {
			return detail + "KVM", nil
		}
		return detail + speedWarning(a), nil
	})
}

// accelError returns the error of a host whose QEMU cannot boot hwk's nodes
// at all.
func accelError(err error) error {
	fix := "check that `virsh -c qemu:///system domcapabilities --machine q35` works; install qemu-system-x86 if it does not"
	if errors.Is(err, errNoFirmware) {
		fix = "install OVMF: `sudo apt-get install ovmf` (Fedora: edk2-ovmf), then restart libvirtd"
	}
	return &drivers.UnavailableError{Driver: config.DriverLibvirt, Reason: err.Error(), Fix: fix}
}

// speedWarning returns what running without KVM means.
func speedWarning(a accel) string {
	return "TCG: QEMU emulates the CPU, so nodes boot and run several times slower than with KVM (KVM here: " + a.Why + ")"
}

// Emulated reports whether the driver runs guests without hardware
// acceleration; valid after Preflight.
func (d *Driver) Emulated() bool { return d.accel.emulated() }

// CheckImage implements drivers.ImageChecker: image is a qcow2 file.
func (d *Driver) CheckImage(_ context.Context, image string) error {
	if _, err := qcow2Size(image); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return &drivers.ImageMissingError{Driver: d.Name(), Image: image, Build: BuildCommand}
		}
		return err
	}
	return nil
}

// qcow2Size returns the virtual size of the qcow2 image at path, from its
// header: the magic "QFI\xfb", then the size as a big-endian uint64 at
// offset 24.
func qcow2Size(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("node image %s: %w", path, err)
	}
	defer f.Close()
	var h [32]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:4]) != "QFI\xfb" {
		return 0, fmt.Errorf("node image %s is not a qcow2 disk; the libvirt driver boots the qcow2 format (`%s`)", path, BuildCommand)
	}
	return binary.BigEndian.Uint64(h[24:32]), nil
}
