package actions

import (
	"context"
	"time"

	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// WaitNetwork waits until every Linux node is Ready, then until
// calico-node is Ready on each: what CoreDNS and calico-kube-controllers,
// which run on Linux, need before they are installed. Windows nodes are
// WaitReady's: a slow one must not hold back the cluster's DNS.
type WaitNetwork struct{}

// Name implements Action.
func (WaitNetwork) Name() string { return "Waiting for nodes and calico-node to be Ready" }

// Describe implements Describer.
func (a WaitNetwork) Describe(c *Context) string {
	if hasWindows(c) {
		return "Waiting for the Linux nodes and calico-node to be Ready"
	}
	return a.Name()
}

// Execute implements Action.
func (WaitNetwork) Execute(ctx context.Context, c *Context) error {
	if err := bootstrap.WaitNodesReady(ctx, c.Client, c.Timeouts.NodesReady, nodeNames(c, config.Linux)...); err != nil {
		return err
	}
	if !hasWindows(c) {
		c.NodesReady = time.Since(c.Started)
	}
	return bootstrap.WaitWorkloads(ctx, c.Client, c.Timeouts.Pods, bootstrap.CalicoNode)
}

// WaitReady waits until the Windows nodes are Ready, then until the
// cluster's own workloads are: Calico, kube-proxy and CoreDNS, and on a
// cluster with Windows nodes Calico's and kube-proxy's Windows DaemonSets
// too (a Windows node can be Ready while they crash-loop on it).
type WaitReady struct{}

// Name implements Action.
func (WaitReady) Name() string { return "Waiting for system pods to be Ready" }

// Describe implements Describer.
func (a WaitReady) Describe(c *Context) string {
	if hasWindows(c) {
		return "Waiting for the Windows nodes and system pods to be Ready"
	}
	return a.Name()
}

// Execute implements Action.
func (WaitReady) Execute(ctx context.Context, c *Context) error {
	windows := hasWindows(c)
	if windows {
		if err := bootstrap.WaitNodesReady(ctx, c.Client, c.Timeouts.NodesReady, nodeNames(c, config.Windows)...); err != nil {
			return err
		}
		c.NodesReady = time.Since(c.Started)
	}
	return bootstrap.WaitWorkloads(ctx, c.Client, c.Timeouts.Pods, bootstrap.SystemWorkloads(windows)...)
}

// hasWindows reports whether the cluster has Windows nodes (workers: the
// control plane is Linux).
func hasWindows(c *Context) bool { return len(c.Workers(config.Windows)) > 0 }

// nodeNames returns the names of the cluster's nodes of one OS.
func nodeNames(c *Context, os config.OS) []string {
	var names []string
	for _, n := range c.Config.Nodes {
		if n.OS == os {
			names = append(names, n.Name)
		}
	}
	return names
}
