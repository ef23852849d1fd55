package hyperv

import (
	"path/filepath"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
)

func (d *Driver) diskPath(r drivers.Ref) string {
	return filepath.Join(d.files().Machine(r), "disk.vhdx")
}

func (d *Driver) seedPath(r drivers.Ref) string {
	return filepath.Join(d.files().Machine(r), "cidata.iso")
}

func (d *Driver) subnetFile(cluster string) string {
	return filepath.Join(d.files().Cluster(cluster), "subnet")
}

// files returns where the driver keeps a cluster's and its nodes' files.
func (d *Driver) files() vmnode.Files { return vmnode.Files{Dirs: d.dirs, Driver: "hyperv"} }
