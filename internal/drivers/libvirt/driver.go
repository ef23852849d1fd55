// Package libvirt runs nodes as QEMU virtual machines through libvirt
// (digitalocean/go-libvirt, pure Go), with one NAT network per cluster and
// a copy-on-write disk per node over the cached node image.
package libvirt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// SystemURI is the libvirt the driver uses: the system instance, whose
// networks can NAT and whose guests outlive the user's session.
const SystemURI = golibvirt.QEMUSystem

// SystemSockets are where a system libvirt listens: the monolithic
// libvirtd (or virtproxyd in front of the modular daemons), then the
// modular QEMU daemon itself.
var SystemSockets = []string{"/var/run/libvirt/libvirt-sock", "/var/run/libvirt/virtqemud-sock"}

// StopGrace is how long Stop waits for a guest to shut down when asked
// (ACPI) before it pulls the plug.
const StopGrace = time.Minute

// BuildCommand is what makes the node image this driver boots.
const BuildCommand = "hwk node-image build linux --formats qcow2"

// Options configure a Driver.
type Options struct {
	// URI is the connection; SystemURI when empty.
	URI golibvirt.ConnectURI
	// Sockets are tried in order; SystemSockets when empty.
	Sockets []string
	// Dirs are hwk's directories. A cluster's directory keeps the
	// driver's files for it (SSH keys, console logs); the cache keeps
	// the verdict of the KVM probe.
	Dirs state.Dirs
	// Warn receives what Create could not give but need not fail over
	// (a disk smaller than the node image's); nil discards it.
	Warn func(string)
}

// Driver is the libvirt driver.
type Driver struct {
	uri     golibvirt.ConnectURI
	sockets []string
	dirs    state.Dirs
	accel   accelCache
	warn    func(string)
	// routes reads the host's routing table; tests replace it.
	routes func() ([]route, error)

	// mu serializes making a cluster's SSH key.
	mu sync.Mutex
}

var (
	_ drivers.Driver          = (*Driver)(nil)
	_ drivers.ImageChecker    = (*Driver)(nil)
	_ drivers.MemoryCommitter = (*Driver)(nil)
)

// New returns a libvirt driver.
func New(o Options) *Driver {
	if o.URI == "" {
		o.URI = SystemURI
	}
	if len(o.Sockets) == 0 {
		o.Sockets = SystemSockets
	}
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	return &Driver{uri: o.URI, sockets: o.Sockets, dirs: o.Dirs, accel: accelCache{dirs: o.Dirs}, warn: o.Warn, routes: hostRoutes}
}

func hostRoutes() ([]route, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return nil, fmt.Errorf("read the host's routes: %w", err)
	}
	defer f.Close()
	return parseRoutes(f)
}

// Name implements drivers.Driver.
func (d *Driver) Name() string { return config.DriverLibvirt }

// StartupMemory implements drivers.MemoryCommitter: QEMU maps a VM's
// memory when it starts and the host backs it as the guest touches it,
// which a Windows guest does to all of it at boot (it zeroes its free
// pages); a node counts as all its memory.
func (d *Driver) StartupMemory(_ config.OS, memory int64) int64 { return memory }

// GuestOSes implements drivers.Driver.
func (d *Driver) GuestOSes() []config.OS { return config.DriverGuests(config.DriverLibvirt) }

// connect opens a connection for one operation; the caller disconnects.
func (d *Driver) connect() (*golibvirt.Libvirt, error) {
	return connect(d.sockets, d.uri)
}

// with runs fn on a connection opened for it, and closes it after.
func (d *Driver) with(fn func(l *golibvirt.Libvirt) error) error {
	_, err := withConn(d, func(l *golibvirt.Libvirt) (struct{}, error) { return struct{}{}, fn(l) })
	return err
}

// withConn is with for an fn that returns a value.
func withConn[T any](d *Driver, fn func(l *golibvirt.Libvirt) (T, error)) (T, error) {
	l, err := d.connect()
	if err != nil {
		var zero T
		return zero, err
	}
	defer l.Disconnect()
	return fn(l)
}

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

// accelError is a host whose QEMU cannot boot hwk's nodes at all.
func accelError(err error) error {
	fix := "check that `virsh -c qemu:///system domcapabilities --machine q35` works; install qemu-system-x86 if it does not"
	if errors.Is(err, errNoFirmware) {
		fix = "install OVMF: `sudo apt-get install ovmf` (Fedora: edk2-ovmf), then restart libvirtd"
	}
	return &drivers.UnavailableError{Driver: config.DriverLibvirt, Reason: err.Error(), Fix: fix}
}

// speedWarning says what running without KVM means.
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

// qcow2Size is the virtual size of the qcow2 image at path, from its
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
