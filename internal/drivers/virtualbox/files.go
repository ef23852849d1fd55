package virtualbox

import (
	"path/filepath"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
)

func (d *Driver) seedISO(r drivers.Ref) string {
	return filepath.Join(d.files().Machine(r), "cidata.iso")
}

// ConsoleLog returns the file a node's serial console (COM1) is logged to.
func (d *Driver) ConsoleLog(r drivers.Ref) string {
	return filepath.Join(d.files().Machine(r), "console.log")
}

// files returns where the driver keeps a cluster's and its nodes' files.
func (d *Driver) files() vmnode.Files { return vmnode.Files{Dirs: d.dirs, Driver: "virtualbox"} }
