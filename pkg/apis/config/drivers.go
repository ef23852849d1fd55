package config

import (
	"slices"
	"sort"
)

// The driver names a config may use.
const (
	DriverDocker     = "docker"
	DriverHyperV     = "hyperv"
	DriverLibvirt    = "libvirt"
	DriverVirtualBox = "virtualbox"
	DriverWSL2       = "wsl2"
)

// driverGuests is which node operating systems each driver can host. It is
// a property of the driver's kind of machine (a container or WSL2 distro
// shares a Linux kernel; a VM can boot anything), so it is known without
// asking the host; whether the driver works on this host is the driver's
// own preflight.
var driverGuests = map[string][]OS{
	DriverDocker:     {Linux},
	DriverHyperV:     {Linux, Windows},
	DriverLibvirt:    {Linux, Windows},
	DriverVirtualBox: {Linux, Windows},
	DriverWSL2:       {Linux},
}

// DriverNames lists every known driver, sorted.
func DriverNames() []string {
	names := make([]string, 0, len(driverGuests))
	for n := range driverGuests {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DriverCanHost reports whether driver can run a node of the given OS.
func DriverCanHost(driver string, os OS) bool {
	return slices.Contains(driverGuests[driver], os)
}

// DriversFor lists the drivers that can host the given OS, sorted.
func DriversFor(os OS) []string {
	var names []string
	for _, n := range DriverNames() {
		if DriverCanHost(n, os) {
			names = append(names, n)
		}
	}
	return names
}

// driverPreference is the order drivers are tried in on each host OS when
// none is named: the hypervisor that ships with the OS first (Hyper-V on
// Windows 10/11 Pro, which WSL2 already runs on; libvirt/KVM on Linux), then
// the portable ones.
var driverPreference = map[string][]string{
	"windows": {DriverHyperV, DriverVirtualBox, DriverWSL2, DriverDocker},
	"linux":   {DriverLibvirt, DriverDocker, DriverVirtualBox},
	"":        {DriverVirtualBox, DriverDocker},
}

// DriverPreference lists the drivers to try on hostOS (a GOOS value), best
// first.
func DriverPreference(hostOS string) []string {
	if p, ok := driverPreference[hostOS]; ok {
		return slices.Clone(p)
	}
	return slices.Clone(driverPreference[""])
}

// DriverGuests lists the node operating systems driver can host.
func DriverGuests(driver string) []OS {
	return slices.Clone(driverGuests[driver])
}

// DefaultDriver returns the driver a node gets when neither the file nor a flag
// names one: the first of DriverPreference(hostOS).
func DefaultDriver(hostOS string) string {
	return DriverPreference(hostOS)[0]
}
