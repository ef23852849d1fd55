package drivers

import (
	"fmt"
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
