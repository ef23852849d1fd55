// Package all is the set of drivers built into hwk. It is its own package
// because drivers import the drivers package, so the list cannot live there.
package all

import (
	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/docker"
	"github.com/hwk-dev/hwk/internal/drivers/hyperv"
	"github.com/hwk-dev/hwk/internal/drivers/libvirt"
	"github.com/hwk-dev/hwk/internal/drivers/virtualbox"
	"github.com/hwk-dev/hwk/internal/drivers/wsl2"
	"github.com/hwk-dev/hwk/internal/state"
)

// Options configure the drivers.
type Options struct {
	// Warn receives what a driver could not do without failing.
	Warn func(string)
	// Force lets the VirtualBox driver run on a Windows whose hypervisor
	// is on, with a warning.
	Force bool
}

// Registry returns a registry of every built-in driver. Each call makes
// fresh drivers (the Hyper-V drivers share one PowerShell session per
// process, the VirtualBox drivers one VBoxManage at a time).
func Registry(o Options) *drivers.Registry {
	dirs := state.DefaultDirs()
	return drivers.NewRegistry(
		docker.New(),
		hyperv.New(hyperv.Options{Dirs: dirs, Warn: o.Warn}),
		libvirt.New(libvirt.Options{Dirs: dirs, Warn: o.Warn}),
		virtualbox.New(virtualbox.Options{Dirs: dirs, Warn: o.Warn, Force: o.Force}),
		wsl2.New(wsl2.Options{Dirs: dirs, Warn: o.Warn}),
	)
}
