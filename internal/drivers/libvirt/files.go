package libvirt

import (
	"path/filepath"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
)

// overlayName, seedName and nvramName return the names of what the driver
// makes for a node. Cluster and node names are DNS labels, so "_" cannot
// make two of them collide.
func overlayName(r drivers.Ref) string { return r.Cluster + "_" + r.Name + ".qcow2" }
func seedName(r drivers.Ref) string    { return r.Cluster + "_" + r.Name + "_cidata.iso" }
func nvramName(r drivers.Ref) string   { return r.Cluster + "_" + r.Name + "_VARS.fd" }

// ConsoleLog returns the file a node's serial console is logged to.
func (d *Driver) ConsoleLog(r drivers.Ref) string {
	return filepath.Join(d.files().Machine(r), "console.log")
}

// files returns where the driver keeps a cluster's and its nodes' files.
func (d *Driver) files() vmnode.Files { return vmnode.Files{Dirs: d.dirs, Driver: "libvirt"} }
