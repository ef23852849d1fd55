package actions

import (
	"fmt"
	"strings"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/hostmem"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// MemoryError is a cluster whose nodes' machines need more memory to
// start than the host has available.
type MemoryError struct {
	// Need is what the machines take when they start, Nodes each one's
	// share ("demo-win-1 3.0 GiB"); Available and Total the host's.
	Need, Available, Total uint64
	Nodes                  []string
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("the cluster's VMs need %s of memory to start (%s), and the host has %s available of %s\n"+
		"  fix: close programs to free memory, give the nodes less (--memory, or nodes[].memory in a config), or make fewer workers (--linux-workers, --windows-workers)",
		drivers.GiB(e.Need), strings.Join(e.Nodes, ", "), drivers.GiB(e.Available), drivers.GiB(e.Total))
}

// checkMemory refuses a cluster whose nodes' machines cannot start in the
// memory the host has available. A host whose memory cannot be read is
// let through, with a warning.
func (c *Context) checkMemory() error {
	need, nodes, err := drivers.StartupMemory(c.Config.Nodes, func(n config.Node) (drivers.Driver, error) { return c.Drivers[n.Name], nil })
	if err != nil || need == 0 {
		return err
	}
	read := c.HostMemory
	if read == nil {
		read = hostmem.Read
	}
	total, avail, err := read()
	if err != nil {
		if c.Log != nil {
			c.Log.Warn(fmt.Sprintf("could not read the host's memory (%v); the VMs need %s to start", err, drivers.GiB(need)))
		}
		return nil
	}
	if need > avail {
		return &MemoryError{Need: need, Available: avail, Total: total, Nodes: nodes}
	}
	return nil
}
