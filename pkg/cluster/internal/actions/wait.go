package actions

import (
	"context"
	"time"

	"github.com/hwk-dev/hwk/pkg/bootstrap"
)

// WaitReady waits until every node is Ready, then until the cluster's own
// workloads are: Calico, kube-proxy and CoreDNS.
type WaitReady struct{}

// Name implements Action.
func (WaitReady) Name() string { return "Waiting for nodes and system pods to be Ready" }

// Execute implements Action.
func (WaitReady) Execute(ctx context.Context, c *Context) error {
	names := make([]string, len(c.Config.Nodes))
	for i, n := range c.Config.Nodes {
		names[i] = n.Name
	}
	if err := bootstrap.WaitNodesReady(ctx, c.Client, c.Timeouts.NodesReady, names...); err != nil {
		return err
	}
	c.NodesReady = time.Since(c.Started)
	return bootstrap.WaitWorkloads(ctx, c.Client, c.Timeouts.Pods,
		bootstrap.Workload{Kind: "DaemonSet", Namespace: "kube-system", Name: "calico-node"},
		bootstrap.Workload{Kind: "Deployment", Namespace: "kube-system", Name: "calico-kube-controllers"},
		bootstrap.Workload{Kind: "DaemonSet", Namespace: "kube-system", Name: "kube-proxy"},
		bootstrap.Workload{Kind: "Deployment", Namespace: "kube-system", Name: "coredns"},
	)
}
