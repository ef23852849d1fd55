package actions

import (
	"context"
	"slices"
	"time"

	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/bootstrap"
)

// WaitNetwork waits until every node is Ready, then until calico-node is
// Ready on every Linux node: what CoreDNS and calico-kube-controllers
// need before they are installed.
type WaitNetwork struct{}

// Name implements Action.
func (WaitNetwork) Name() string { return "Waiting for nodes and calico-node to be Ready" }

// Execute implements Action.
func (WaitNetwork) Execute(ctx context.Context, c *Context) error {
	names := make([]string, len(c.Config.Nodes))
	for i, n := range c.Config.Nodes {
		names[i] = n.Name
	}
	if err := bootstrap.WaitNodesReady(ctx, c.Client, c.Timeouts.NodesReady, names...); err != nil {
		return err
	}
	c.NodesReady = time.Since(c.Started)
	return bootstrap.WaitWorkloads(ctx, c.Client, c.Timeouts.Pods, bootstrap.CalicoNode)
}

// WaitReady waits until the cluster's own workloads are Ready: Calico,
// kube-proxy and CoreDNS, and on a cluster with Windows nodes Calico's
// and kube-proxy's Windows DaemonSets too (a Windows node can be Ready
// while they crash-loop on it).
type WaitReady struct{}

// Name implements Action.
func (WaitReady) Name() string { return "Waiting for system pods to be Ready" }

// Execute implements Action.
func (WaitReady) Execute(ctx context.Context, c *Context) error {
	windows := slices.ContainsFunc(c.Config.Nodes, func(n config.Node) bool { return n.OS == config.Windows })
	return bootstrap.WaitWorkloads(ctx, c.Client, c.Timeouts.Pods, bootstrap.SystemWorkloads(windows)...)
}
