package vmnode

import (
	"path/filepath"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/state"
)

// Files locates what a VM driver keeps on the host for a cluster and its
// nodes: the driver's directory in each cluster's directory, and a
// directory per node in it.
type Files struct {
	Dirs   state.Dirs
	Driver string
}

// Cluster returns the driver's directory in cluster's directory.
func (f Files) Cluster(cluster string) string {
	return state.NewStore(f.Dirs).DriverDir(cluster, f.Driver)
}

// Machine returns node r's directory: its disks, seed, console log and
// pinned host key.
func (f Files) Machine(r drivers.Ref) string {
	return filepath.Join(f.Cluster(r.Cluster), r.Name)
}

// Paths returns where node r's identity lives: the cluster's SSH key and
// the node's host key, as an OpenSSH known_hosts file.
func (f Files) Paths(r drivers.Ref) Paths {
	return Paths{
		ClusterKey: filepath.Join(f.Cluster(r.Cluster), "id_ed25519"),
		KnownHosts: filepath.Join(f.Machine(r), "known_hosts"),
	}
}
