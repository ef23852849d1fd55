package actions

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/nodeimage/winimage"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// Nodes creates and boots every node's machine, all at once, and waits
// until each has its container runtime up.
type Nodes struct{}

// Name implements Action.
func (Nodes) Name() string { return "Creating nodes" }

// Execute implements Action.
func (Nodes) Execute(ctx context.Context, c *Context) error {
	// Only Windows nodes show phases: a Linux node boots in seconds.
	phases := ui.NewPhases(c.Status)
	return parallel(c.Config.Nodes, func(n config.Node) error {
		spec, err := machineSpec(c, n)
		if err != nil {
			return err
		}
		if err := c.Drivers[n.Name].Create(ctx, spec); err != nil {
			return err
		}
		if n.OS == config.Windows {
			return waitWindowsBooted(ctx, c, n, phases)
		}
		return waitBooted(ctx, c, n)
	})
}

func machineSpec(c *Context, n config.Node) (drivers.MachineSpec, error) {
	mem, err := resource.ParseQuantity(n.Memory)
	if err != nil {
		return drivers.MachineSpec{}, fmt.Errorf("node %s: memory: %w", n.Name, err)
	}
	disk, err := resource.ParseQuantity(n.Disk)
	if err != nil {
		return drivers.MachineSpec{}, fmt.Errorf("node %s: disk: %w", n.Name, err)
	}
	ip, err := netip.ParseAddr(n.IP)
	if err != nil {
		return drivers.MachineSpec{}, fmt.Errorf("node %s: ip: %w", n.Name, err)
	}
	spec := drivers.MachineSpec{
		Ref:         drivers.Ref{Cluster: c.Config.Name, Name: n.Name},
		Role:        n.Role,
		OS:          n.OS,
		Image:       c.Images[n.Name],
		CPUs:        n.CPUs,
		MemoryBytes: mem.Value(),
		DiskBytes:   disk.Value(),
		IP:          ip,
		Start:       true,
		Autostart:   c.Config.Autostart,
	}
	if n.Role == config.ControlPlane {
		spec.Ports = []uint16{uint16(c.Config.Networking.APIServerPort)}
	}
	if n.OS == config.Windows {
		// The node's own Administrator password, in its seed only: the
		// image holds none, and hwk logs in with the cluster's key.
		password, err := winimage.NewPassword()
		if err != nil {
			return drivers.MachineSpec{}, fmt.Errorf("node %s: %w", n.Name, err)
		}
		c.mu.Lock()
		locale := c.locales[n.Name]
		c.mu.Unlock()
		if spec.Seed.AnswerFile, err = winimage.CloneUnattend(winimage.CloneOptions{Locale: locale, AdminPassword: password}); err != nil {
			return drivers.MachineSpec{}, fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return spec, nil
}

// waitBooted waits until a Linux node's container runtime runs: the first
// thing kubeadm needs. A Windows node's first boot is waitWindowsBooted's.
func waitBooted(ctx context.Context, c *Context, n config.Node) error {
	check := []string{"systemctl", "is-active", "--quiet", "containerd"}
	err := retry(ctx, c.Timeouts.NodeBoot, 200*time.Millisecond, func(ctx context.Context) error {
		h, err := c.Node(ctx, n.Name)
		if err != nil {
			return err
		}
		return h.Run(ctx, node.Cmd{Args: check})
	})
	if err == nil || ctx.Err() != nil {
		return err
	}
	err = fmt.Errorf("node %s did not start its container runtime within %s: %w", n.Name, c.Timeouts.NodeBoot, err)
	if h, herr := c.Node(context.WithoutCancel(ctx), n.Name); herr == nil {
		out, _ := h.Output(context.WithoutCancel(ctx), "journalctl", "--no-pager", "-o", "short", "-n", "15")
		return withLog(err, "last lines of the node's journal", out, "")
	}
	return err
}
