package actions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// JoinWorkers joins the Windows workers, at once. They need Calico's
// Windows components, which the steps before apply; Linux workers join
// earlier, while Calico is installed (see Calico).
type JoinWorkers struct{}

// Name implements Action.
func (JoinWorkers) Name() string { return "Joining Windows workers" }

// Skip implements Skipper.
func (JoinWorkers) Skip(c *Context) bool { return !hasWindows(c) }

// Execute implements Action.
func (JoinWorkers) Execute(ctx context.Context, c *Context) error {
	return joinWorkers(ctx, c, config.Windows)
}

// joinWorkers joins every worker of one OS, at once.
func joinWorkers(ctx context.Context, c *Context, os config.OS) error {
	byName := map[string]bootstrap.Node{}
	for _, w := range c.Boot.Workers {
		byName[w.Name] = w
	}
	return parallel(c.Workers(os), func(n config.Node) error {
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
		return runLogged(ctx, c, "kubeadm-join-"+n.Name, func(w io.Writer) error { return bootstrap.Join(ctx, h, cfg, c.Boot.ServiceSubnet, w) },
			func(err error, tail, path string) error {
				err = withLog(fmt.Errorf("kubeadm join on %s: %w", n.Name, err), "last lines of kubeadm join", hostexec.LastLines(tail, 15), path)
				return withLog(err, "last lines of the kubelet's log on "+n.Name, bootstrap.KubeletJournal(context.WithoutCancel(ctx), h, 10), "")
			})
	})
}

// joinWindows runs bootstrap.WindowsJoin: SSH, the build check, the
// route to a WSL2 control plane (again after Calico's vSwitch), kubeadm
// join, and the kubelet's restart once Calico's vSwitch is up. A failure
// shows the ends of the node's kubelet, containerd and Calico logs.
func joinWindows(ctx context.Context, c *Context, n config.Node, h *node.Node, cfg []byte) error {
	return runLogged(ctx, c, "kubeadm-join-"+n.Name, func(w io.Writer) error {
		j := &bootstrap.WindowsJoin{
			Node: h, Version: n.WindowsVersion, Config: cfg, Log: w,
			SSH: c.Timeouts.WindowsBoot, Network: c.Timeouts.Pods, Poll: 2 * time.Second,
		}
		if drivers.TraitsOf(c.Drivers[c.ControlPlane().Name]).NeedsHostRoute {
			// The control plane is on a switch of its own, not the
			// node's: the host routes its address.
			subnet, err := netip.ParsePrefix(c.Config.Networking.NodeSubnet)
			if err != nil {
				return err
			}
			j.ViaGateway, j.Gateway = []netip.Addr{c.Boot.ControlPlane.IP}, drivers.Network{Subnet: subnet}.Gateway()
		}
		return j.Run(ctx)
	}, func(err error, tail, path string) error {
		var we *bootstrap.WindowsJoinError
		if errors.As(err, &we) && (we.Step == bootstrap.StepSSH || we.Step == bootstrap.StepBuild) {
			return err // nothing ran that logs
		}
		err = withLog(err, "last lines of kubeadm join", hostexec.LastLines(tail, 15), path)
		return withLog(err, "the node's logs", bootstrap.WindowsLogs(context.WithoutCancel(ctx), h, 10), "")
	})
}
