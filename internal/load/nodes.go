package load

import (
	"context"
	"errors"
	"sync"

	"github.com/hwk-dev/hwk/internal/containerd"
	"github.com/hwk-dev/hwk/internal/format/imagearchive"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// loadNode is a node an image may go to.
type loadNode struct {
	name     string
	platform imagearchive.Platform
	handle   *node.Node
	inv      *containerd.Inventory
}

// loadNodes opens a handle on each node and reads what it holds, all at
// once.
func loadNodes(ctx context.Context, c Cluster, targets []config.Node) ([]*loadNode, error) {
	out := make([]*loadNode, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, n := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = openNode(ctx, c, n)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// openNode opens node n and reads its containerd's inventory and
// platform.
func openNode(ctx context.Context, c Cluster, n config.Node) (*loadNode, error) {
	h, err := c.Open(ctx, n)
	if err != nil {
		return nil, err
	}
	inv, err := containerd.List(ctx, h)
	if err != nil {
		return nil, err
	}
	plat := imagearchive.Platform{OS: string(n.OS), Architecture: inv.Arch}.Normalize()
	if n.OS == config.Windows {
		plat.OSVersion = config.WindowsBuilds[n.WindowsVersion]
	}
	return &loadNode{name: n.Name, platform: plat, handle: h, inv: inv}, nil
}
