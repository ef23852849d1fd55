package cluster

import (
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/kubeconfig"
	"github.com/hwk-dev/hwk/pkg/state"
)

// upDown is the ground the per-driver up and down tests share
// (TestHyperVUpDown, TestVirtualBoxUpDown, TestWSLUpDown): hwk's
// directories and kubeconfig in a home of t's, cluster demo of a Linux
// control plane and a Windows worker, scripted node handles, and the API
// server an in-memory cluster.
type upDown struct {
	dirs  state.Dirs
	kc    kubeconfig.Paths
	cfg   *config.Cluster
	nodes *scriptedNodes
}

// newUpDown makes the ground for a control plane on driver cp and a worker
// on driver worker, on a Windows host whose default driver is host; adjust,
// if not nil, changes the config before its defaults are set.
func newUpDown(t *testing.T, cp, worker, host string, adjust func(*config.Cluster)) *upDown {
	t.Helper()
	home := t.TempDir()
	u := &upDown{
		dirs: state.Dirs{Config: filepath.Join(home, "config"), Data: filepath.Join(home, "data"), Cache: filepath.Join(home, "cache")},
		kc:   kubeconfig.Paths{Explicit: filepath.Join(home, "kubeconfig")},
		cfg: &config.Cluster{Name: "demo", Nodes: []config.Node{
			{Name: "demo-cp", Role: config.ControlPlane, OS: config.Linux, Driver: cp},
			{Name: "demo-win-1", Role: config.Worker, OS: config.Windows, Driver: worker},
		}},
	}
	if adjust != nil {
		adjust(u.cfg)
	}
	config.SetDefaults(u.cfg, config.Host{OS: "windows", Drivers: map[config.OS]string{config.Linux: host, config.Windows: host}})
	if err := config.Validate(u.cfg); err != nil {
		t.Fatal(err)
	}
	u.nodes = newScriptedNodes(t)
	return u
}

// provider is a provider over ds, as one hwk command makes it.
func (u *upDown) provider(ds ...drivers.Driver) *Provider {
	return &Provider{Registry: drivers.NewRegistry(ds...), Dirs: u.dirs, KubeconfigPaths: u.kc, newClient: inMemoryCluster(u.cfg),
		hostInterface: func(netip.Prefix) string { return "" }}
}

// upOptions gives each stage of up time no slow machine runs out of.
var upOptions = UpOptions{Timeouts: Timeouts{NodeBoot: 30 * time.Second, APIServer: 30 * time.Second, NodesReady: 30 * time.Second, Pods: 30 * time.Second}}
