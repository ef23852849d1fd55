// Package all is the set of drivers built into hwk. It is its own package
// because drivers import the drivers package, so the list cannot live there.
package all

import (
	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/drivers/docker"
	"github.com/hwk-dev/hwk/drivers/hyperv"
	"github.com/hwk-dev/hwk/drivers/libvirt"
	"github.com/hwk-dev/hwk/pkg/state"
)

// Registry returns a registry of every built-in driver. Each call makes
// fresh drivers (the Hyper-V drivers share one PowerShell session per
// process). warn receives what a driver could not do without failing.
func Registry(warn func(string)) *drivers.Registry {
	dirs := state.DefaultDirs()
	return drivers.NewRegistry(
		docker.New(),
		hyperv.New(hyperv.Options{Dirs: dirs, Warn: warn}),
		libvirt.New(libvirt.Options{Dirs: dirs}),
	)
}
