package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// NodeHandles are one cluster's nodes, for work done on them outside
// the life of the cluster (internal/load's Load takes them): its record's
// nodes under its lock, and a handle on each that runs.
type NodeHandles struct {
	p       *Provider
	cluster string
}

// NodeHandles gives the nodes of cluster name.
func (p *Provider) NodeHandles(name string) *NodeHandles {
	return &NodeHandles{p: p, cluster: name}
}

// Lock takes the cluster's lock and returns its record's nodes named in
// want (every node when want is empty), and what drops the lock.
func (c *NodeHandles) Lock(want []string) ([]config.Node, func(), error) {
	unlock, err := c.p.lock(c.cluster)
	if err != nil {
		return nil, nil, err
	}
	rec, err := c.p.record(c.cluster)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	nodes, err := selectNodes(rec, want)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return nodes, unlock, nil
}

// Open checks that node n runs and opens a handle on it.
func (c *NodeHandles) Open(ctx context.Context, n config.Node) (*node.Node, error) {
	d, err := c.p.Registry.Get(n.Driver)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	ref := drivers.Ref{Cluster: c.cluster, Name: n.Name}
	if m, err := d.Inspect(ctx, ref); err == nil && m.State != drivers.StateRunning {
		return nil, fmt.Errorf("node %s is %s, not running; images can only be loaded into a running node", n.Name, m.State)
	}
	h, err := d.Node(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return h, nil
}

// selectNodes picks the record's nodes named in want (all when empty).
func selectNodes(rec *config.Cluster, want []string) ([]config.Node, error) {
	if len(want) == 0 {
		return rec.Nodes, nil
	}
	var names []string
	for _, n := range rec.Nodes {
		names = append(names, n.Name)
	}
	var out []config.Node
	for _, w := range want {
		i := slices.Index(names, w)
		if i < 0 {
			return nil, fmt.Errorf("cluster %s has no node %q; its nodes are %s", rec.Name, w, strings.Join(names, ", "))
		}
		if !slices.ContainsFunc(out, func(n config.Node) bool { return n.Name == w }) {
			out = append(out, rec.Nodes[i])
		}
	}
	return out, nil
}
