package hyperv

import (
	"path/filepath"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
	"github.com/hwk-dev/hwk/internal/state"
)

// clusterFiles returns the directory of the driver's files for cluster
// and its nodes.
func (d *Driver) clusterFiles(cluster string) string {
	return state.NewStore(d.dirs).DriverDir(cluster, "hyperv")
}

func (d *Driver) machineDir(r drivers.Ref) string {
	return filepath.Join(d.clusterFiles(r.Cluster), r.Name)
}

func (d *Driver) diskPath(r drivers.Ref) string { return filepath.Join(d.machineDir(r), "disk.vhdx") }

func (d *Driver) seedPath(r drivers.Ref) string { return filepath.Join(d.machineDir(r), "cidata.iso") }

func (d *Driver) subnetFile(cluster string) string {
	return filepath.Join(d.clusterFiles(cluster), "subnet")
}

func (d *Driver) paths(r drivers.Ref) vmnode.Paths {
	return vmnode.Paths{
		ClusterKey: filepath.Join(d.clusterFiles(r.Cluster), "id_ed25519"),
		KnownHosts: filepath.Join(d.machineDir(r), "known_hosts"),
	}
}
