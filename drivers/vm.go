package drivers

// What the VM drivers (hyperv, libvirt, virtualbox) share: the checks of
// a node's spec, and the endpoint of a node reached at its own address.

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// VMRules are what a VM driver needs of every node it makes.
type VMRules struct {
	// Driver is the driver's name; Hypervisor how people write it
	// ("Hyper-V").
	Driver, Hypervisor string
	Guests             []config.OS
	// ImageFormat names the disk an image is ("a VHDX disk").
	ImageFormat string
	// MinMemory is the least memory a node gets.
	MinMemory int64
}

// CheckVM refuses a spec a VM driver cannot make, before anything is
// made: a guest OS it does not run, no IPv4 address, no image, too
// little CPU or memory.
func CheckVM(spec MachineSpec, r VMRules) error {
	switch {
	case !slices.Contains(r.Guests, spec.OS):
		return fmt.Errorf("node %s: the %s driver cannot run %q nodes", spec.Name, r.Driver, spec.OS)
	case !spec.IP.Is4():
		return fmt.Errorf("node %s: %s nodes need an IPv4 address, not %q", spec.Name, r.Hypervisor, spec.IP)
	case spec.Image == "":
		return fmt.Errorf("node %s: no node image (%s) given", spec.Name, r.ImageFormat)
	case spec.CPUs < 1 || spec.MemoryBytes < r.MinMemory:
		return fmt.Errorf("node %s: %d CPUs and %d MiB of memory is too little for a node", spec.Name, spec.CPUs, spec.MemoryBytes>>20)
	}
	return nil
}

// Inspector is the part of a Driver that reports what a machine is.
type Inspector interface {
	Inspect(ctx context.Context, r Ref) (Machine, error)
}

// OwnAddress implements HostEndpoint for a driver whose host reaches each
// node at the node's own address (hwk's switch or network): port at the
// machine's IP. what names the machine for the error when there is none
// ("Hyper-V VM").
func OwnAddress(ctx context.Context, d Inspector, r Ref, port uint16, what string) (netip.AddrPort, error) {
	m, err := d.Inspect(ctx, r)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if m.State == StateMissing {
		return netip.AddrPort{}, fmt.Errorf("node %s of cluster %s has no %s", r.Name, r.Cluster, what)
	}
	return netip.AddrPortFrom(m.IP, port), nil
}
