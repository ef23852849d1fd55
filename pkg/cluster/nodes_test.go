package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/load"
	"github.com/hwk-dev/hwk/internal/testing/imagearchivetest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster/internal/clusterdir"
)

// nodesCluster makes the record of a cluster "lc" of one node, cp, whose
// machine runs when running is set.
func nodesCluster(t *testing.T, running bool) *Provider {
	t.Helper()
	d := newMem()
	p, _ := testProvider(t, d)
	cfg := testConfig(t, "lc", config.Node{Name: "cp", Role: config.ControlPlane})
	if running {
		d.machines["lc/cp"] = drivers.MachineSpec{Ref: drivers.Ref{Cluster: "lc", Name: "cp"}, OS: config.Linux}
	}
	dir, err := p.store().Create("lc")
	if err != nil {
		t.Fatal(err)
	}
	if err := clusterdir.WriteRecord(dir, cfg); err != nil {
		t.Fatal(err)
	}
	return p
}

// oneImageArchive writes an OCI archive of one linux/amd64 image, a:1.
func oneImageArchive(t *testing.T) string {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "images.tar")
	data := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"a:1"}, Platforms: []string{"linux/amd64"}})
	if err := os.WriteFile(archive, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return archive
}

// TestLoadNamesUnknownNodes checks that load-image into a node the cluster
// lacks, or into a cluster that does not exist, names what is missing, and
// leaves the cluster unlocked.
func TestLoadNamesUnknownNodes(t *testing.T) {
	p := nodesCluster(t, true)
	archive := oneImageArchive(t)
	_, err := load.Load(context.Background(), p.NodeHandles("lc"), load.Options{Archives: []string{archive}, Nodes: []string{"nope"}})
	if err == nil || !strings.Contains(err.Error(), `cluster lc has no node "nope"; its nodes are cp`) {
		t.Errorf("err = %v", err)
	}
	_, err = load.Load(context.Background(), p.NodeHandles("other"), load.Options{Archives: []string{archive}})
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Errorf("unknown cluster: %v", err)
	}
	nodes, unlock, err := p.NodeHandles("lc").Lock(nil)
	if err != nil {
		t.Fatalf("the failed loads left the cluster locked: %v", err)
	}
	defer unlock()
	if len(nodes) != 1 || nodes[0].Name != "cp" {
		t.Errorf("nodes = %v, want cp", nodes)
	}
}

// TestNodeHandlesOpenRefusesNodesThatDoNotRun checks that a node whose
// machine is not running is refused by name, before any handle on it is
// opened; a load-image into it fails with that message and leaves the
// cluster unlocked.
func TestNodeHandlesOpenRefusesNodesThatDoNotRun(t *testing.T) {
	const want = "node cp is missing, not running; images can only be loaded into a running node"
	p := nodesCluster(t, false)
	h := p.NodeHandles("lc")
	nodes, unlock, err := h.Lock(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Open(context.Background(), nodes[0])
	unlock()
	if err == nil || err.Error() != want {
		t.Errorf("err = %v", err)
	}

	archive := oneImageArchive(t)
	_, err = load.Load(context.Background(), h, load.Options{Archives: []string{archive}})
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("load into a node that does not run: err = %v", err)
	}
	if _, unlock, err := h.Lock(nil); err != nil {
		t.Errorf("the failed load left the cluster locked: %v", err)
	} else {
		unlock()
	}
}
