package libvirt

import (
	"sync"

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

// Name implements drivers.Driver.
func (d *Driver) Name() string { return config.DriverLibvirt }

// GuestOSes implements drivers.Driver.
func (d *Driver) GuestOSes() []config.OS { return config.DriverGuests(config.DriverLibvirt) }
