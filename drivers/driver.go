// Package drivers is the contract between hwk and the things that run its
// nodes: containers (docker), VMs (Hyper-V, libvirt, VirtualBox) and WSL2
// distros. A driver makes, starts, stops and deletes machines and the
// cluster's network, and hands back a node handle; it knows nothing of
// Kubernetes.
package drivers

import (
	"context"
	"io/fs"
	"net/netip"

	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// Driver is implemented by every driver. Methods that change things are
// idempotent: creating what exists with the same spec, starting a running
// machine, stopping a stopped one or deleting a missing one succeed.
type Driver interface {
	// Name is the driver's config name (config.DriverDocker, ...).
	Name() string
	// GuestOSes lists the node operating systems the driver can host.
	GuestOSes() []config.OS
	// Preflight checks that the host can use the driver now. On success it
	// returns one line describing what it found (versions, mode); otherwise
	// an *UnavailableError saying why and how to fix it.
	Preflight(ctx context.Context) (string, error)

	// EnsureNetwork creates the cluster's network, or checks that the one
	// already there matches.
	EnsureNetwork(ctx context.Context, n Network) error
	// DeleteNetwork removes the cluster's network and anything the driver
	// made for it alone.
	DeleteNetwork(ctx context.Context, cluster string) error

	// Create makes a machine for spec, stopped or running per spec.Start.
	Create(ctx context.Context, spec MachineSpec) error
	Start(ctx context.Context, m Ref) error
	// Stop shuts the machine down, gracefully first.
	Stop(ctx context.Context, m Ref) error
	// Delete removes the machine and every disk, volume or seed made for
	// it, including the leftovers of a Create that failed half-way.
	Delete(ctx context.Context, m Ref) error
	// Inspect reports a machine; a missing one is StateMissing, not an
	// error.
	Inspect(ctx context.Context, m Ref) (Machine, error)
	// List reports every machine the driver holds for cluster.
	List(ctx context.Context, cluster string) ([]Machine, error)
	// HostEndpoint is the address on which the host reaches TCP port on
	// the machine (a published port for containers, the node IP for VMs).
	HostEndpoint(ctx context.Context, m Ref, port uint16) (netip.AddrPort, error)
	// Node is a handle for running commands on a running machine.
	Node(ctx context.Context, m Ref) (*node.Node, error)
}

// Ref names a machine: nodes are named within their cluster.
type Ref struct {
	Cluster string
	Name    string
}

func (r Ref) String() string { return r.Name }

// Network is a cluster's node network: a fixed subnet on which every node
// has a static address, and from which the host and the internet are
// reachable.
type Network struct {
	Cluster string
	Subnet  netip.Prefix
}

// Gateway returns the host side of the network: the subnet's first address.
func (n Network) Gateway() netip.Addr {
	return n.Subnet.Masked().Addr().Next()
}

// MachineSpec is everything a driver needs to make a node's machine.
type MachineSpec struct {
	Ref
	Role config.Role
	OS   config.OS
	// Image is the node image, in the driver's own terms (an image
	// reference for docker, a cached disk path for VM drivers).
	Image       string
	CPUs        int
	MemoryBytes int64
	DiskBytes   int64
	IP          netip.Addr
	// Ports are guest TCP ports the host must reach (the API server's);
	// see Driver.HostEndpoint.
	Ports []uint16
	Seed  Seed
	// Start boots the machine once it is made.
	Start bool
	// Autostart has a VM start with the host (see config.Cluster).
	Autostart bool
}

// Seed is first-boot data: who may log in and files placed before the
// node's init runs. Container drivers write it into the machine; VM drivers
// put it on a cidata seed disk.
type Seed struct {
	SSHAuthorizedKeys []string
	Files             []File
	// AnswerFile is a Windows node's answer file for its first boot's
	// Setup (its own Administrator password among it); VM drivers put it
	// at the root of the seed disk as unattend.xml, where Setup finds it.
	AnswerFile []byte
}

// File is one file a Seed places on the node.
type File struct {
	Path    string
	Mode    fs.FileMode
	Content []byte
}

// State is where a machine is in its life.
type State string

const (
	StateMissing State = "missing"
	StateStopped State = "stopped"
	StateRunning State = "running"
	// StateOther covers states a driver has but hwk does not act on
	// (paused, saved, restarting).
	StateOther State = "other"
)

// Machine is a machine as the driver sees it now.
type Machine struct {
	Ref
	Role  config.Role
	OS    config.OS
	State State
	// Detail is the driver's own word for the state when it tells more
	// than State ("paused", "exited (137)").
	Detail string
	IP     netip.Addr
}

// ImageChecker is implemented by drivers whose node images live in a store
// of their own (the docker driver's engine), so that `hwk up` can find a
// missing image before it creates anything. It returns an
// *ImageMissingError when image is not there.
type ImageChecker interface {
	CheckImage(ctx context.Context, image string) error
}

// SubnetChecker is implemented by drivers that can say, before anything is
// made, whether a subnet is free for a cluster's network: that none of the
// driver's networks except the cluster's own, and nothing on the host the
// driver would route through, overlaps it. It returns a
// *SubnetInUseError when something does.
type SubnetChecker interface {
	CheckSubnet(ctx context.Context, n Network) error
}

// Autostarter is implemented by VM drivers whose autostart would boot a
// machine hwk stop stopped: hwk stop turns it off, hwk start on again.
type Autostarter interface {
	SetAutostart(ctx context.Context, m Ref, on bool) error
}

// UpChecker is implemented by drivers with conditions that making and
// running nodes need and removing them does not (WSL's networking mode).
// Preflight stays "hwk can reach its machines", so that `down` works on a
// host changed since `up`; `up` and `hwk get drivers` ask CheckUp too. It
// returns an *UnavailableError saying why and how to fix it.
type UpChecker interface {
	CheckUp(ctx context.Context) error
}

// Experimental is implemented by drivers hwk ships before they have run
// on the hosts they are for. Limits returns what is known not to work, or
// has not been tried. Such a driver is used only when a config or flag
// names it.
type Experimental interface {
	Limits() string
}

// Emulator is implemented by VM drivers that fall back to emulating the
// CPU when the host's hypervisor cannot run guests. Emulated is valid
// after a successful Preflight. Such a driver is chosen by default only
// when no driver with hardware acceleration can host the node OS.
type Emulator interface {
	Emulated() bool
}
