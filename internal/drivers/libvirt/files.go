package libvirt

import (
	"path/filepath"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
	"github.com/hwk-dev/hwk/internal/state"
)

// overlayName, seedName and nvramName return the names of what the driver
// makes for a node. Cluster and node names are DNS labels, so "_" cannot
// make two of them collide.
func overlayName(r drivers.Ref) string { return r.Cluster + "_" + r.Name + ".qcow2" }
func seedName(r drivers.Ref) string    { return r.Cluster + "_" + r.Name + "_cidata.iso" }
func nvramName(r drivers.Ref) string   { return r.Cluster + "_" + r.Name + "_VARS.fd" }

// clusterFiles returns the driver's directory in the cluster's directory.
func (d *Driver) clusterFiles(cluster string) string {
	return state.NewStore(d.dirs).DriverDir(cluster, "libvirt")
}

// machineFiles returns where a node's console log and host key are kept.
func (d *Driver) machineFiles(r drivers.Ref) string {
	return filepath.Join(d.clusterFiles(r.Cluster), r.Name)
}

// ConsoleLog returns the file a node's serial console is logged to.
func (d *Driver) ConsoleLog(r drivers.Ref) string {
	return filepath.Join(d.machineFiles(r), "console.log")
}

func (d *Driver) clusterKeyPath(cluster string) string {
	return filepath.Join(d.clusterFiles(cluster), "id_ed25519")
}

// knownHostsPath returns the node's pinned host key, as an OpenSSH
// known_hosts file, so that `ssh -o UserKnownHostsFile=` can use it too.
func (d *Driver) knownHostsPath(r drivers.Ref) string {
	return filepath.Join(d.machineFiles(r), "known_hosts")
}

// paths returns where the node's identity lives.
func (d *Driver) paths(r drivers.Ref) vmnode.Paths {
	return vmnode.Paths{ClusterKey: d.clusterKeyPath(r.Cluster), KnownHosts: d.knownHostsPath(r)}
}
