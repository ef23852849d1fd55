package actions

import (
	"context"
	"fmt"
	"io"

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
		return runLogged(ctx, c, "kubeadm-join-"+n.Name, func(w io.Writer) error { return bootstrap.Join(ctx, h, cfg, w) },
			func(err error, tail, path string) error {
				err = withLog(fmt.Errorf("kubeadm join on %s: %w", n.Name, err), "last lines of kubeadm join", node.LastLines(tail, 15), path)
				return withLog(err, "last lines of the kubelet's log on "+n.Name, bootstrap.KubeletJournal(context.WithoutCancel(ctx), h, 10), "")
			})
	})
}
