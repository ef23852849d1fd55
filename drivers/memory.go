package drivers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// MemoryCommitter is implemented by VM drivers whose machines take host
// memory when they start and fail to start without it (Hyper-V refuses
// Start-VM when it cannot commit a VM's startup memory). `hwk up` sums
// what its nodes' machines need and refuses, before it makes anything,
// when the host has less available; `hwk doctor` reports the same sum.
type MemoryCommitter interface {
	// StartupMemory is what a node of os with memory bytes (its
	// nodes[].memory) takes from the host when its machine starts.
	StartupMemory(os config.OS, memory int64) int64
}

// StartupMemory returns what nodes' machines take from the host when they
// start, by the drivers that commit memory then (MemoryCommitter), with
// each node's share ("demo-win-1 3.0 GiB"); nodes of other drivers
// (containers) count nothing. driver gives a node's driver.
func StartupMemory(nodes []config.Node, driver func(config.Node) (Driver, error)) (need uint64, shares []string, err error) {
	for _, n := range nodes {
		d, err := driver(n)
		if err != nil {
			return 0, nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		m, ok := d.(MemoryCommitter)
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(n.Memory)
		if err != nil {
			return 0, nil, fmt.Errorf("node %s: memory: %w", n.Name, err)
		}
		b := uint64(m.StartupMemory(n.OS, q.Value()))
		need += b
		shares = append(shares, n.Name+" "+GiB(b))
	}
	return need, shares, nil
}

// GiB returns n bytes in GiB, to a tenth.
func GiB(n uint64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }
