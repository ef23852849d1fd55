package cluster

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/kubeconfig"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
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

// laptop returns the memory of a 16 GB laptop with a browser and an IDE open
// (7-10 GB free: shared/research/windows-review-4.md, D2).
func laptop() (uint64, uint64, error) { return 16 << 30, 7 << 30, nil }

// provider returns a provider over ds, as one hwk command makes it.
func (u *upDown) provider(ds ...drivers.Driver) *Provider {
	return &Provider{Registry: drivers.NewRegistry(ds...), Dirs: u.dirs, KubeconfigPaths: u.kc, newClient: inMemoryCluster(u.cfg),
		hostInterface: func(netip.Prefix) string { return "" }, hostMemory: laptop}
}

// upOptions gives each stage of up time no slow machine runs out of.
var upOptions = UpOptions{Timeouts: Timeouts{NodeBoot: 30 * time.Second, APIServer: 30 * time.Second, NodesReady: 30 * time.Second, Pods: 30 * time.Second}}

// cachedImage puts node image name in the cache with one disk, file in
// format, which write makes at the path it is given and whose size it
// returns; a non-nil win makes it a Windows image.
func cachedImage(t *testing.T, cache, name, version string, win *nodeimage.Windows, format nodeimage.Format, file string, write func(path string) int64) {
	t.Helper()
	nodeOS := "linux"
	if win != nil {
		nodeOS = "windows"
	}
	m := &nodeimage.Manifest{Name: name, OS: nodeOS, KubernetesVersion: version, Windows: win, Built: time.Now(),
		Dir: filepath.Join(nodeimage.ImagesDir(cache), name)}
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	size := write(filepath.Join(m.Dir, file))
	m.Artifacts = map[nodeimage.Format]nodeimage.Artifact{format: {Path: file, Size: size}}
	if err := m.Write(); err != nil {
		t.Fatal(err)
	}
}
