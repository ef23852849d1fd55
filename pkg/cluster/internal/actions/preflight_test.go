package actions

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers"

	"github.com/hwk-dev/hwk/internal/testing/driverstest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// TestNodeImageWindowsVersion checks that a Windows node gets an image of
// its own Windows Server release, in its driver's format, whose file is
// there; without one the error gives the command that builds it, and no
// pull.
func TestNodeImageWindowsVersion(t *testing.T) {
	cache := t.TempDir()
	// Each format's file is there (empty, as its manifest records): a cached
	// image whose file is gone is not used.
	image := func(name string, formats ...nodeimage.Format) *nodeimage.Manifest {
		m := &nodeimage.Manifest{Name: name, OS: "windows", KubernetesVersion: "v1.35.4", Dir: filepath.Join(cache, name),
			Artifacts: map[nodeimage.Format]nodeimage.Artifact{}}
		if err := os.MkdirAll(m.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range formats {
			m.Artifacts[f] = nodeimage.Artifact{Path: "disk." + string(f)}
			if err := os.WriteFile(m.FilePath(f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	win := func(name, version string, formats ...nodeimage.Format) *nodeimage.Manifest {
		m := image(name, formats...)
		m.Windows = &nodeimage.Windows{Version: version}
		return m
	}
	linux := image("linux-x", nodeimage.FormatQCOW2)
	linux.OS = "linux"
	gone := win("windows-2022-gone", "2022", nodeimage.FormatQCOW2)
	if err := os.Remove(gone.FilePath(nodeimage.FormatQCOW2)); err != nil {
		t.Fatal(err)
	}
	cached := []*nodeimage.Manifest{linux, gone,
		win("windows-2025-x", "2025", nodeimage.FormatQCOW2),
		win("windows-2022-x", "2022", nodeimage.FormatQCOW2, nodeimage.FormatVHDX),
	}
	lv := driverstest.Up(config.DriverLibvirt)
	nodeImage := func(version string, n config.Node, d drivers.Driver) (string, error) {
		c := &Context{Config: &config.Cluster{KubernetesVersion: version, Nodes: []config.Node{n}}, Drivers: map[string]drivers.Driver{n.Name: d}, Pull: PullMissing}
		err := c.planImages(context.Background(), cached)
		return c.Images[n.Name], err
	}
	node := config.Node{Name: "w1", OS: config.Windows, WindowsVersion: "2022"}
	got, err := nodeImage("v1.35.4", node, lv)
	if err != nil || got != filepath.Join(cache, "windows-2022-x", "disk.qcow2") {
		t.Errorf("2022 node: %q, %v", got, err)
	}
	node.WindowsVersion = "2025"
	if got, err := nodeImage("v1.35.4", node, lv); err != nil || got != filepath.Join(cache, "windows-2025-x", "disk.qcow2") {
		t.Errorf("2025 node: %q, %v", got, err)
	}
	// Only 2022 has a VHDX; Windows images are never pulled by default.
	_, err = nodeImage("v1.35.4", node, driverstest.Up(config.DriverHyperV))
	var ni *nodeimage.NoImageError
	if !errors.As(err, &ni) || !strings.Contains(err.Error(), "no cached Windows Server 2025 node image for Kubernetes v1.35.4 has the vhdx format") ||
		!strings.Contains(err.Error(), "hwk node-image build windows --iso PATH --version 2025 --formats vhdx") ||
		!strings.Contains(err.Error(), "never downloaded") {
		t.Errorf("2025 on Hyper-V: %v", err)
	}
	_, err = nodeImage("v1.36.1", config.Node{Name: "w1", OS: config.Windows, WindowsVersion: "2022"}, lv)
	if err == nil || !strings.Contains(err.Error(), "--kubernetes-version v1.36.1") {
		t.Errorf("another Kubernetes version: %v", err)
	}
}
