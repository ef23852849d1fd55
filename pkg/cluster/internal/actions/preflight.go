package actions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster/internal/clusterdir"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// Preflight checks everything `up` needs before anything is made: that the
// cluster does not exist, that every node's driver works here, that the
// host has the memory the nodes' VMs start with, and that every node image
// is there or can be pulled (an unreachable registry fails here, with the
// other ways to get the image).
type Preflight struct{}

// Name implements Action.
func (Preflight) Name() string { return "Checking the host" }

// Execute implements Action.
func (Preflight) Execute(ctx context.Context, c *Context) error {
	cfg := c.Config
	cached, err := nodeimage.List(c.CacheDir)
	if err != nil {
		return err
	}
	// Windows images first: without one there is nothing a driver check
	// could add, and the advice is what the user needs.
	if err := checkWindowsImages(cfg, cached); err != nil {
		return err
	}
	exists, err := c.Store.Exists(cfg.Name)
	if err != nil {
		return err
	}
	if exists {
		dir, err := c.Store.ClusterDir(cfg.Name)
		if err != nil {
			return err
		}
		_, err = os.Stat(filepath.Join(dir, clusterdir.KubeconfigFile))
		return &ExistsError{Cluster: cfg.Name, HalfMade: err != nil}
	}

	c.Drivers = map[string]drivers.Driver{}
	checked := map[string]bool{}
	emulated := false
	for _, n := range cfg.Nodes {
		d, err := c.Registry.Get(n.Driver)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		c.Drivers[n.Name] = d
		if checked[n.Driver] {
			continue
		}
		checked[n.Driver] = true
		detail, err := drivers.PreflightUp(ctx, d)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		if e, ok := d.(drivers.Emulator); ok && e.Emulated() {
			if !emulated {
				emulated = true
				// Why 4: under TCG on two cores, a one-node cluster on
				// libvirt took 14 minutes to be Ready (kubeadm init 2.5
				// min, Calico's pods 9 more), against under a minute on
				// the docker driver.
				c.Timeouts = c.Timeouts.Scale(EmulationSlowdown)
			}
			if c.Log != nil {
				c.Log.Warn(fmt.Sprintf("driver %s: %s; up waits %d times longer for each step", d.Name(), detail, EmulationSlowdown))
			}
		}
		ms, err := d.List(ctx, cfg.Name)
		if err != nil {
			return err
		}
		if len(ms) > 0 {
			return &ExistsError{Cluster: cfg.Name, Leftover: fmt.Sprintf("%s machine %s", d.Name(), ms[0].Name)}
		}
	}

	if err := c.checkMemory(); err != nil {
		return err
	}
	if err := c.planImages(ctx, cached); err != nil {
		return err
	}
	// Last of the checks, as it reserves the subnet; node addresses are
	// final from here on.
	if err := c.chooseSubnet(ctx); err != nil {
		return err
	}

	c.Boot, err = bootstrap.FromConfig(cfg, bootstrap.NewToken(), func(n config.Node) bool {
		return drivers.TraitsOf(c.Drivers[n.Name]).SharesHostKernel
	})
	if err != nil {
		return err
	}
	if drivers.TraitsOf(c.Drivers[cfg.Nodes[0].Name]).APIOnLoopback {
		c.Boot.ExtraSANs = []string{"127.0.0.1"}
	}
	return nil
}

// record writes the cluster's directory, the first thing `up` makes, so
// that `down` can always find what the next steps make. It comes after
// the checks and any pull: an `up` that stops before it leaves nothing to
// clean up, and running it again goes on with the downloads.
func (c *Context) record() error {
	var err error
	c.Dir, err = c.Store.Create(c.Config.Name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(c.Dir, clusterdir.LogsDir), 0o700); err != nil {
		return err
	}
	if err := clusterdir.WriteRecord(c.Dir, c.Config); err != nil {
		return err
	}
	return state.WriteFileAtomic(filepath.Join(c.Dir, clusterdir.TokenFile), []byte(c.Boot.Token+"\n"), 0o600)
}

// ExistsError is a cluster that is already there.
type ExistsError struct {
	Cluster string
	// Leftover names a machine of the cluster found without a cluster
	// directory (what a crashed hwk leaves).
	Leftover string
	// HalfMade is a cluster whose up stopped before it wrote the
	// kubeconfig (it failed, or was interrupted or killed).
	HalfMade bool
}

func (e *ExistsError) Error() string {
	again := "run the same `hwk up` with --recreate to remove it and make it again in one go"
	switch {
	case e.Leftover != "":
		return fmt.Sprintf("cluster %s has a leftover %s\n  fix: %s, or remove it with `hwk down --name %s`", e.Cluster, e.Leftover, again, e.Cluster)
	case e.HalfMade:
		return fmt.Sprintf("cluster %s is half-made: an earlier up did not finish\n  fix: %s, or remove it with `hwk down --name %s`", e.Cluster, again, e.Cluster)
	}
	return fmt.Sprintf("cluster %s already exists\n  fix: use it (`kubectl --context hwk-%s get nodes`), delete it with `hwk down --name %s`, pick another name with --name, or make it again with --recreate", e.Cluster, e.Cluster, e.Cluster)
}

// NoWindowsImageError is a cluster with Windows nodes and no Windows node
// image to make them from.
type NoWindowsImageError struct {
	Nodes []string
}

// WindowsImageHelp is what a Windows worker needs.
const WindowsImageHelp = "a Windows worker boots from a Windows node image, which hwk makes once from your Windows Server ISO: `hwk node-image build windows --iso PATH` (about half an hour with KVM or Hyper-V; see site/content/docs/windows-image.md)"

func (e *NoWindowsImageError) Error() string {
	return fmt.Sprintf("no Windows node image is cached, and the cluster has Windows nodes (%s)\n  fix: for a Linux-only cluster, `hwk up --windows-workers 0`\n  (%s)",
		joinNames(e.Nodes), WindowsImageHelp)
}

func joinNames(names []string) string { return strings.Join(names, ", ") }

func checkWindowsImages(cfg *config.Cluster, ms []*nodeimage.Manifest) error {
	var win []string
	for _, n := range cfg.Nodes {
		// A node whose config names an image to pull needs none cached.
		if n.OS == config.Windows && !config.IsImageRef(n.Image) {
			win = append(win, n.Name)
		}
	}
	if len(win) == 0 {
		return nil
	}
	if !slices.ContainsFunc(ms, func(m *nodeimage.Manifest) bool { return m.OS == string(config.Windows) }) {
		return &NoWindowsImageError{Nodes: win}
	}
	return nil
}
