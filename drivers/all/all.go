// Package all is the set of drivers built into hwk. It is its own package
// because drivers import the drivers package, so the list cannot live there.
package all

import (
	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/drivers/docker"
	"github.com/hwk-dev/hwk/drivers/libvirt"
	"github.com/hwk-dev/hwk/pkg/state"
)

// Registry returns a registry of every built-in driver. Each call makes
// fresh drivers, so nothing is shared between callers.
func Registry() *drivers.Registry {
	return drivers.NewRegistry(docker.New(), libvirt.New(libvirt.Options{Dirs: state.DefaultDirs()}))
}
