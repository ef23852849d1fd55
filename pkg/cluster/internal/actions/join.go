package actions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/bootstrap"
	"github.com/hwk-dev/hwk/pkg/node"
)

// JoinWorkers joins every worker, Linux and Windows, at once.
type JoinWorkers struct{}

// Name implements Action.
func (JoinWorkers) Name() string { return "Joining workers" }

// Execute implements Action.
func (JoinWorkers) Execute(ctx context.Context, c *Context) error {
	byName := map[string]bootstrap.Node{}
	for _, w := range c.Boot.Workers {
		byName[w.Name] = w
	}
	return parallel(c.Workers(""), func(n config.Node) error {
		h, err := c.Node(ctx, n.Name)
		if err != nil {
			return err
		}
		cfg, err := bootstrap.JoinConfig(c.Boot, byName[n.Name], c.CACertHash)
		if err != nil {
			return err
		}
		if n.OS == config.Windows {
			return joinWindows(ctx, c, n, h, cfg)
		}
		return runLogged(ctx, c, "kubeadm-join-"+n.Name, func(w io.Writer) error { return bootstrap.Join(ctx, h, cfg, w) },
			func(err error, tail, path string) error {
				err = withLog(fmt.Errorf("kubeadm join on %s: %w", n.Name, err), "last lines of kubeadm join", node.LastLines(tail, 15), path)
				return withLog(err, "last lines of the kubelet's log on "+n.Name, bootstrap.KubeletJournal(context.WithoutCancel(ctx), h, 10), "")
			})
	})
}

// joinWindows runs bootstrap.WindowsJoin: SSH, the build check, kubeadm
// join, and the kubelet's restart once Calico's vSwitch is up. A failure
// shows the ends of the node's kubelet, containerd and Calico logs.
func joinWindows(ctx context.Context, c *Context, n config.Node, h *node.Node, cfg []byte) error {
	return runLogged(ctx, c, "kubeadm-join-"+n.Name, func(w io.Writer) error {
		j := &bootstrap.WindowsJoin{
			Node: h, Version: n.WindowsVersion, Config: cfg, Log: w,
			SSH: c.Timeouts.NodeBoot, Network: c.Timeouts.Pods, Poll: 2 * time.Second,
		}
		return j.Run(ctx)
	}, func(err error, tail, path string) error {
		var we *bootstrap.WindowsJoinError
		if errors.As(err, &we) && (we.Step == bootstrap.StepSSH || we.Step == bootstrap.StepBuild) {
			return err // nothing ran that logs
		}
		err = withLog(err, "last lines of kubeadm join", node.LastLines(tail, 15), path)
		return withLog(err, "the node's logs", bootstrap.WindowsLogs(context.WithoutCancel(ctx), h, 10), "")
	})
}
