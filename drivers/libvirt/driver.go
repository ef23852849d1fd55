package libvirt

import (
	"context"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/drivers/internal/vmnode"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
	"github.com/hwk-dev/hwk/pkg/state"
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
	_ drivers.Driver       = (*Driver)(nil)
	_ drivers.ImageChecker = (*Driver)(nil)
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

// Names of what the driver makes for a node. Cluster and node names are
// DNS labels, so "_" cannot make two of them collide.
func overlayName(r drivers.Ref) string { return r.Cluster + "_" + r.Name + ".qcow2" }
func seedName(r drivers.Ref) string    { return r.Cluster + "_" + r.Name + "_cidata.iso" }
func nvramName(r drivers.Ref) string   { return r.Cluster + "_" + r.Name + "_VARS.fd" }

// clusterFiles is the driver's directory in the cluster's directory.
func (d *Driver) clusterFiles(cluster string) string {
	return state.NewStore(d.dirs).DriverDir(cluster, "libvirt")
}

// machineFiles is where a node's console log and host key are kept.
func (d *Driver) machineFiles(r drivers.Ref) string {
	return filepath.Join(d.clusterFiles(r.Cluster), r.Name)
}

// ConsoleLog is the file a node's serial console is logged to.
func (d *Driver) ConsoleLog(r drivers.Ref) string {
	return filepath.Join(d.machineFiles(r), "console.log")
}

func (d *Driver) clusterKeyPath(cluster string) string {
	return filepath.Join(d.clusterFiles(cluster), "id_ed25519")
}

// knownHostsPath is the node's pinned host key, as an OpenSSH
// known_hosts file, so that `ssh -o UserKnownHostsFile=` can use it too.
func (d *Driver) knownHostsPath(r drivers.Ref) string {
	return filepath.Join(d.machineFiles(r), "known_hosts")
}

// CheckSubnet implements drivers.SubnetChecker: the cluster's own network
// is no conflict; another libvirt network or a host route over the subnet
// is.
func (d *Driver) CheckSubnet(_ context.Context, n drivers.Network) error {
	n.Subnet = n.Subnet.Masked()
	return d.with(func(l *golibvirt.Libvirt) error {
		if _, err := l.NetworkLookupByName(NetworkName(n.Cluster)); err == nil {
			return nil
		}
		return d.subnetConflict(l, n)
	})
}

// subnetConflict finds a host route or another libvirt network over the
// subnet of a cluster that has no network yet.
func (d *Driver) subnetConflict(l *golibvirt.Libvirt, n drivers.Network) error {
	routes, err := d.routes()
	if err != nil {
		return err
	}
	if c := routeConflict(routes, n.Subnet, bridgeName(n.Cluster)); c != nil {
		return c
	}
	if c, err := networkConflict(l, n.Subnet, NetworkName(n.Cluster)); err != nil || c != nil {
		if c != nil {
			return c
		}
		return err
	}
	return nil
}

// EnsureNetwork implements drivers.Driver: the cluster's NAT network, on
// a subnet no host route and no other libvirt network uses.
func (d *Driver) EnsureNetwork(_ context.Context, n drivers.Network) error {
	if !n.Subnet.Addr().Is4() || n.Subnet.Bits() > 29 {
		return fmt.Errorf("network %s: subnet %s must be IPv4 with room for nodes (/29 or larger)", NetworkName(n.Cluster), n.Subnet)
	}
	n.Subnet = n.Subnet.Masked()
	return d.with(func(l *golibvirt.Libvirt) error {
		name := NetworkName(n.Cluster)
		nw, err := l.NetworkLookupByName(name)
		switch {
		case err == nil:
			raw, err := l.NetworkGetXMLDesc(nw, 0)
			if err != nil {
				return fmt.Errorf("read network %s: %w", name, err)
			}
			if got := networkPrefixes(raw); len(got) != 1 || got[0] != n.Subnet {
				return fmt.Errorf("libvirt network %s is there with subnet %v, not the cluster's %s\n  fix: remove the cluster with `hwk down --name %s`, or the network with `virsh -c qemu:///system net-destroy %s; virsh -c qemu:///system net-undefine %s`",
					name, got, n.Subnet, n.Cluster, name, name)
			}
			return ensureNetwork(l, name, raw)
		case !isCode(err, golibvirt.ErrNoNetwork):
			return fmt.Errorf("look up network %s: %w", name, err)
		}
		if err := d.subnetConflict(l, n); err != nil {
			return err
		}
		xml, err := networkXML(n, nil)
		if err != nil {
			return err
		}
		return ensureNetwork(l, name, xml)
	})
}

// DeleteNetwork implements drivers.Driver: the network, and the driver's
// files in the cluster's directory (its SSH key).
func (d *Driver) DeleteNetwork(_ context.Context, cluster string) error {
	return d.with(func(l *golibvirt.Libvirt) error {
		return d.deleteNetwork(l, cluster)
	})
}

func (d *Driver) deleteNetwork(l *golibvirt.Libvirt, cluster string) error {
	if err := removeNetwork(l, NetworkName(cluster)); err != nil {
		return err
	}
	if err := os.RemoveAll(d.clusterFiles(cluster)); err != nil {
		return fmt.Errorf("remove the libvirt driver's files of cluster %s: %w", cluster, err)
	}
	return nil
}

// Create implements drivers.Driver.
func (d *Driver) Create(ctx context.Context, spec drivers.MachineSpec) error {
	if err := d.validate(spec); err != nil {
		return err
	}
	virtual, err := qcow2Size(spec.Image)
	if err != nil {
		return err
	}
	return d.with(func(l *golibvirt.Libvirt) error {

		meta, found, err := domainMeta(l, spec.Name)
		if err != nil {
			return err
		}
		if found {
			if meta == nil || meta.Cluster != spec.Cluster {
				return &drivers.NameInUseError{Name: spec.Name, Cluster: spec.Cluster, Owner: fmt.Sprintf("libvirt domain %q", spec.Name),
					Remove: "virsh -c qemu:///system undefine --nvram " + spec.Name}
			}
			if spec.Start {
				return startDomain(l, spec.Name)
			}
			return nil
		}

		subnet, err := clusterSubnet(l, spec.Cluster)
		if err != nil {
			return err
		}
		if !subnet.Contains(spec.IP) || spec.IP == subnet.Addr() || spec.IP == (drivers.Network{Subnet: subnet}).Gateway() {
			return fmt.Errorf("node %s: address %s is not a node address of the cluster's subnet %s", spec.Name, spec.IP, subnet)
		}
		// The seed's files are checked before anything is written.
		if _, err := seedFiles(spec, subnet); err != nil {
			return err
		}
		a, _, err := d.accel.get(ctx, l, true)
		if err != nil {
			return err
		}

		seed, err := d.seed(spec)
		if err != nil {
			return err
		}
		files, err := seedFiles(seed, subnet)
		if err != nil {
			return err
		}
		pool, err := ensurePool(l)
		if err != nil {
			return err
		}
		base, err := d.baseVolume(ctx, l, pool, spec.Image)
		if err != nil {
			return err
		}
		// Leftovers of a Create that failed before the domain was defined.
		for _, v := range []string{overlayName(spec.Ref), seedName(spec.Ref)} {
			if err := deleteVolume(l, pool, v); err != nil {
				return err
			}
		}
		// The overlay is made at the size the node asks for, which the
		// guest grows its partition into at boot; never below the image's.
		size, warning := drivers.DiskSize(spec.Name, spec.DiskBytes, int64(virtual))
		if warning != "" {
			d.warn(warning)
		}
		disk, err := overlayVolume(l, pool, overlayName(spec.Ref), base, uint64(size))
		if err != nil {
			return err
		}
		seedPath, err := d.uploadSeed(l, pool, spec.Ref, files)
		if err != nil {
			return err
		}
		if err := setDHCPHost(l, NetworkName(spec.Cluster), dhcpHost{Name: spec.Name, IP: spec.IP}, true); err != nil {
			return err
		}
		domXML, err := domainXML(domainSpec{
			MachineSpec: spec,
			Disk:        disk,
			Seed:        seedPath,
			NVRAM:       poolDir + "/" + nvramName(spec.Ref),
			Console:     d.ConsoleLog(spec.Ref),
			KVM:         a.KVM,
			TPM:         a.TPM && spec.OS == config.Windows,
		})
		if err != nil {
			return err
		}
		dom, err := l.DomainDefineXML(domXML)
		if err != nil {
			return fmt.Errorf("define domain %s: %w", spec.Name, err)
		}
		if spec.Autostart {
			if err := l.DomainSetAutostart(dom, 1); err != nil {
				return fmt.Errorf("node %s: autostart: %w", spec.Name, err)
			}
		}
		if spec.Start {
			return startDomain(l, spec.Name)
		}
		return nil
	})
}

// validate refuses a spec before anything is made.
func (d *Driver) validate(spec drivers.MachineSpec) error {
	return drivers.CheckVM(spec, drivers.VMRules{Driver: "libvirt", Hypervisor: "libvirt", Guests: d.GuestOSes(), ImageFormat: "a qcow2 disk", MinMemory: 256 << 20})
}

// seed is spec's seed plus the node's identity (vmnode.AddIdentity),
// kept in the node's 0700 directory.
func (d *Driver) seed(spec drivers.MachineSpec) (drivers.MachineSpec, error) {
	if err := os.MkdirAll(d.machineFiles(spec.Ref), 0o700); err != nil {
		return spec, fmt.Errorf("node %s: %w", spec.Name, err)
	}
	return vmnode.AddIdentity(spec, d.paths(spec.Ref), &d.mu)
}

// paths are where the node's identity lives.
func (d *Driver) paths(r drivers.Ref) vmnode.Paths {
	return vmnode.Paths{ClusterKey: d.clusterKeyPath(r.Cluster), KnownHosts: d.knownHostsPath(r)}
}

// uploadSeed writes the node's seed ISO and streams it into the pool. The
// local copy holds the node's private host key, so it lives only as long
// as the upload, in the node's 0700 directory.
func (d *Driver) uploadSeed(l *golibvirt.Libvirt, pool golibvirt.StoragePool, r drivers.Ref, files map[string][]byte) (string, error) {
	iso := filepath.Join(d.machineFiles(r), ".cidata.iso")
	defer os.Remove(iso)
	if err := vmnode.WriteSeedISO(iso, files); err != nil {
		return "", err
	}
	return uploadFile(l, pool, seedName(r), iso)
}

// clusterSubnet is the subnet of the cluster's network, which
// EnsureNetwork made.
func clusterSubnet(l *golibvirt.Libvirt, cluster string) (netip.Prefix, error) {
	name := NetworkName(cluster)
	nw, err := l.NetworkLookupByName(name)
	if isCode(err, golibvirt.ErrNoNetwork) {
		return netip.Prefix{}, fmt.Errorf("cluster %s has no libvirt network %s; it is made before the nodes (`hwk up` does)", cluster, name)
	}
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("look up network %s: %w", name, err)
	}
	raw, err := l.NetworkGetXMLDesc(nw, 0)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("read network %s: %w", name, err)
	}
	ps := networkPrefixes(raw)
	if len(ps) != 1 {
		return netip.Prefix{}, fmt.Errorf("network %s has %d IPv4 ranges; hwk made it with one", name, len(ps))
	}
	return ps[0], nil
}

// Start implements drivers.Driver.
func (d *Driver) Start(_ context.Context, r drivers.Ref) error {
	return d.with(func(l *golibvirt.Libvirt) error {
		if err := d.own(l, r); err != nil {
			return err
		}
		return startDomain(l, r.Name)
	})
}

// Stop implements drivers.Driver: an ACPI shutdown, then power off after
// StopGrace.
func (d *Driver) Stop(ctx context.Context, r drivers.Ref) error {
	return d.with(func(l *golibvirt.Libvirt) error {
		if err := d.own(l, r); err != nil {
			return err
		}
		return stopDomain(ctx, l, r.Name, StopGrace)
	})
}

// own checks that r's domain exists and is the cluster's.
func (d *Driver) own(l *golibvirt.Libvirt, r drivers.Ref) error {
	meta, found, err := domainMeta(l, r.Name)
	switch {
	case err != nil:
		return err
	case !found || meta == nil || meta.Cluster != r.Cluster:
		return fmt.Errorf("node %s of cluster %s has no libvirt domain\n  fix: remove the cluster with `hwk down --name %s` and make it again", r.Name, r.Cluster, r.Cluster)
	}
	return nil
}

// Delete implements drivers.Driver: the domain with its UEFI variables,
// the node's disk and seed, its DHCP reservation and files; the network
// too when no node of the cluster is left.
func (d *Driver) Delete(_ context.Context, r drivers.Ref) error {
	return d.with(func(l *golibvirt.Libvirt) error {
		meta, found, err := domainMeta(l, r.Name)
		if err != nil {
			return err
		}
		// A domain of that name that is not the cluster's is left alone; the
		// volumes below are named for the cluster, so they are its own.
		if found && meta != nil && meta.Cluster == r.Cluster {
			if err := removeDomain(l, r.Name); err != nil {
				return err
			}
		}
		if pool, err := l.StoragePoolLookupByName(poolName); err == nil {
			for _, v := range []string{overlayName(r), seedName(r), nvramName(r)} {
				if err := deleteVolume(l, pool, v); err != nil {
					return err
				}
			}
		} else if !isCode(err, golibvirt.ErrNoStoragePool) {
			return fmt.Errorf("look up storage pool %s: %w", poolName, err)
		}
		if err := setDHCPHost(l, NetworkName(r.Cluster), dhcpHost{Name: r.Name}, false); err != nil {
			return err
		}
		if err := os.RemoveAll(d.machineFiles(r)); err != nil {
			return fmt.Errorf("remove the files of node %s: %w", r.Name, err)
		}
		left, err := listMachines(l, r.Cluster)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return d.deleteNetwork(l, r.Cluster)
		}
		return nil
	})
}

// Inspect implements drivers.Driver.
func (d *Driver) Inspect(_ context.Context, r drivers.Ref) (drivers.Machine, error) {
	return withConn(d, func(l *golibvirt.Libvirt) (drivers.Machine, error) {
		m, err := inspect(l, r.Name)
		if err != nil {
			return drivers.Machine{}, err
		}
		if m.State == drivers.StateMissing || m.Cluster != r.Cluster {
			return drivers.Machine{Ref: r, State: drivers.StateMissing}, nil
		}
		return m, nil
	})
}

// List implements drivers.Driver.
func (d *Driver) List(_ context.Context, cluster string) ([]drivers.Machine, error) {
	return withConn(d, func(l *golibvirt.Libvirt) ([]drivers.Machine, error) {
		return listMachines(l, cluster)
	})
}

// HostEndpoint implements drivers.Driver: the host is on the cluster's
// network, so it reaches the node at its own address.
func (d *Driver) HostEndpoint(ctx context.Context, r drivers.Ref, port uint16) (netip.AddrPort, error) {
	return drivers.OwnAddress(ctx, d, r, port, "libvirt domain")
}

// Node implements drivers.Driver: SSH to the node's address with the
// cluster's key, accepting only the host key hwk made for the node. A
// Linux node asks DHCP for its address, so its lease must show the
// reserved address first.
func (d *Driver) Node(_ context.Context, r drivers.Ref) (*node.Node, error) {
	return withConn(d, func(l *golibvirt.Libvirt) (*node.Node, error) {
		m, err := inspect(l, r.Name)
		if err != nil {
			return nil, err
		}
		switch {
		case m.State == drivers.StateMissing || m.Cluster != r.Cluster:
			return nil, fmt.Errorf("node %s of cluster %s has no libvirt domain", r.Name, r.Cluster)
		case m.State != drivers.StateRunning:
			return nil, fmt.Errorf("node %s is %s, not running; start it with `hwk start --name %s`", r.Name, m.Detail, r.Cluster)
		}
		if m.OS == config.Linux {
			if err := confirmLease(l, r, m.IP, d.ConsoleLog(r)); err != nil {
				return nil, err
			}
		}
		return vmnode.Handle(r.Name, m.OS, m.IP, d.paths(r))
	})
}

// confirmLease checks that the network's DHCP server gave the node its
// reserved address.
func confirmLease(l *golibvirt.Libvirt, r drivers.Ref, ip netip.Addr, console string) error {
	name := NetworkName(r.Cluster)
	nw, err := l.NetworkLookupByName(name)
	if err != nil {
		return fmt.Errorf("look up network %s: %w", name, err)
	}
	leases, _, err := l.NetworkGetDhcpLeases(nw, golibvirt.OptString{MAC(ip)}, 1, 0)
	if err != nil {
		return fmt.Errorf("DHCP leases of network %s: %w", name, err)
	}
	var got []string
	for _, le := range leases {
		got = append(got, le.Ipaddr)
	}
	return checkLease(r, ip, got, console)
}

// checkLease: the addresses leased to the node's MAC include its own.
func checkLease(r drivers.Ref, ip netip.Addr, leased []string, console string) error {
	if slices.Contains(leased, ip.String()) {
		return nil
	}
	if len(leased) > 0 {
		return fmt.Errorf("node %s (MAC %s) leased %s, not its reserved %s; its console log is %s", r.Name, MAC(ip), strings.Join(leased, ", "), ip, console)
	}
	return fmt.Errorf("node %s (MAC %s) has no DHCP lease on %s yet: it is still booting, or its network did not come up (console log: %s)", r.Name, MAC(ip), NetworkName(r.Cluster), console)
}

// domainMeta reads hwk's metadata of the named domain. found says whether
// the domain exists; meta is nil when it exists but hwk did not make it.
func domainMeta(l *golibvirt.Libvirt, name string) (meta *nodeMetadata, found bool, err error) {
	dom, err := l.DomainLookupByName(name)
	if golibvirt.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up domain %s: %w", name, err)
	}
	meta, err = readMetadata(l, dom)
	return meta, true, err
}

func readMetadata(l *golibvirt.Libvirt, dom golibvirt.Domain) (*nodeMetadata, error) {
	raw, err := l.DomainGetMetadata(dom, int32(golibvirt.DomainMetadataElement), golibvirt.OptString{metadataNS}, golibvirt.DomainAffectCurrent)
	if isCode(err, golibvirt.ErrNoDomainMetadata) || golibvirt.IsNotFound(err) {
		// Not hwk's, or gone since it was listed.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metadata of domain %s: %w", dom.Name, err)
	}
	// libvirt hands back the element asked for by namespace, without the
	// namespace.
	var m struct {
		XMLName xml.Name
		Cluster string `xml:"cluster,attr"`
		Name    string `xml:"name,attr"`
		Role    string `xml:"role,attr"`
		OS      string `xml:"os,attr"`
		IP      string `xml:"ip,attr"`
	}
	if err := xml.Unmarshal([]byte(raw), &m); err != nil {
		return nil, fmt.Errorf("metadata of domain %s: %w", dom.Name, err)
	}
	return &nodeMetadata{NS: metadataNS, Cluster: m.Cluster, Name: m.Name, Role: m.Role, OS: m.OS, IP: m.IP}, nil
}

// inspect describes the named domain from its metadata and state.
func inspect(l *golibvirt.Libvirt, name string) (drivers.Machine, error) {
	dom, err := l.DomainLookupByName(name)
	if golibvirt.IsNotFound(err) {
		return drivers.Machine{Ref: drivers.Ref{Name: name}, State: drivers.StateMissing}, nil
	}
	if err != nil {
		return drivers.Machine{}, fmt.Errorf("look up domain %s: %w", name, err)
	}
	return describe(l, dom)
}

func describe(l *golibvirt.Libvirt, dom golibvirt.Domain) (drivers.Machine, error) {
	meta, err := readMetadata(l, dom)
	if err != nil || meta == nil {
		return drivers.Machine{Ref: drivers.Ref{Name: dom.Name}, State: drivers.StateMissing}, err
	}
	s, _, err := l.DomainGetState(dom, 0)
	if golibvirt.IsNotFound(err) {
		return drivers.Machine{Ref: drivers.Ref{Name: dom.Name}, State: drivers.StateMissing}, nil
	}
	if err != nil {
		return drivers.Machine{}, fmt.Errorf("state of domain %s: %w", dom.Name, err)
	}
	ip, _ := netip.ParseAddr(meta.IP)
	state, detail := machineState(golibvirt.DomainState(s))
	return drivers.Machine{
		Ref:    drivers.Ref{Cluster: meta.Cluster, Name: dom.Name},
		Role:   config.Role(meta.Role),
		OS:     config.OS(meta.OS),
		State:  state,
		Detail: detail,
		IP:     ip,
	}, nil
}

// machineState maps libvirt's domain states to hwk's.
func machineState(s golibvirt.DomainState) (drivers.State, string) {
	switch s {
	case golibvirt.DomainRunning:
		return drivers.StateRunning, "running"
	case golibvirt.DomainShutoff:
		return drivers.StateStopped, "shut off"
	case golibvirt.DomainPaused:
		return drivers.StateOther, "paused"
	case golibvirt.DomainShutdown:
		return drivers.StateOther, "shutting down"
	case golibvirt.DomainCrashed:
		return drivers.StateOther, "crashed"
	case golibvirt.DomainPmsuspended:
		return drivers.StateOther, "suspended"
	case golibvirt.DomainBlocked:
		return drivers.StateRunning, "blocked"
	}
	return drivers.StateOther, fmt.Sprintf("state %d", s)
}

// listMachines is every domain hwk made for cluster.
func listMachines(l *golibvirt.Libvirt, cluster string) ([]drivers.Machine, error) {
	doms, _, err := l.ConnectListAllDomains(1, 0)
	if err != nil {
		return nil, fmt.Errorf("list libvirt domains: %w", err)
	}
	var out []drivers.Machine
	for _, dom := range doms {
		m, err := describe(l, dom)
		if err != nil {
			return nil, err
		}
		if m.State != drivers.StateMissing && m.Cluster == cluster {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b drivers.Machine) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SetAutostart implements drivers.Autostarter: libvirtd starts an
// autostart domain whenever it starts, even one hwk stop shut down.
func (d *Driver) SetAutostart(_ context.Context, m drivers.Ref, on bool) error {
	return d.with(func(l *golibvirt.Libvirt) error {
		dom, err := l.DomainLookupByName(m.Name)
		if err != nil {
			return fmt.Errorf("node %s: %w", m.Name, err)
		}
		flag := int32(0)
		if on {
			flag = 1
		}
		if err := l.DomainSetAutostart(dom, flag); err != nil {
			return fmt.Errorf("node %s: autostart: %w", m.Name, err)
		}
		return nil
	})
}
