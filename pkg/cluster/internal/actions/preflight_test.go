package actions

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers/driverstest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// TestNodeImageWindowsVersion: a Windows node gets an image of its own
// Windows Server release, in its driver's format; without one the error
// gives the command that builds it.
func TestNodeImageWindowsVersion(t *testing.T) {
	win := func(name, version string, formats ...nodeimage.Format) *nodeimage.Manifest {
		m := &nodeimage.Manifest{Name: name, OS: "windows", KubernetesVersion: "v1.35.4", Dir: "/cache/" + name,
			Windows: &nodeimage.Windows{Version: version}, Artifacts: map[nodeimage.Format]nodeimage.Artifact{}}
		for _, f := range formats {
			m.Artifacts[f] = nodeimage.Artifact{Path: "disk." + string(f)}
		}
		return m
	}
	cached := []*nodeimage.Manifest{
		{Name: "linux-x", OS: "linux", KubernetesVersion: "v1.35.4", Dir: "/cache/linux-x", Artifacts: map[nodeimage.Format]nodeimage.Artifact{nodeimage.FormatQCOW2: {Path: "disk.qcow2"}}},
		win("windows-2025-x", "2025", nodeimage.FormatQCOW2),
		win("windows-2022-x", "2022", nodeimage.FormatQCOW2, nodeimage.FormatVHDX),
	}
	lv := driverstest.Up(config.DriverLibvirt)
	node := config.Node{Name: "w1", OS: config.Windows, WindowsVersion: "2022"}
	got, err := nodeImage(context.Background(), cached, "v1.35.4", node, lv)
	if err != nil || got != filepath.Join("/cache/windows-2022-x", "disk.qcow2") {
		t.Errorf("2022 node: %q, %v", got, err)
	}
	node.WindowsVersion = "2025"
	if got, err := nodeImage(context.Background(), cached, "v1.35.4", node, lv); err != nil || got != filepath.Join("/cache/windows-2025-x", "disk.qcow2") {
		t.Errorf("2025 node: %q, %v", got, err)
	}
	// Only 2022 has a VHDX.
	_, err = nodeImage(context.Background(), cached, "v1.35.4", node, driverstest.Up(config.DriverHyperV))
	if err == nil || !strings.Contains(err.Error(), "no cached Windows Server 2025 node image for Kubernetes v1.35.4 has the vhdx format") ||
		!strings.Contains(err.Error(), "hwk node-image build windows --iso PATH --version 2025 --formats vhdx") {
		t.Errorf("2025 on Hyper-V: %v", err)
	}
	_, err = nodeImage(context.Background(), cached, "v1.36.1", config.Node{Name: "w1", OS: config.Windows, WindowsVersion: "2022"}, lv)
	if err == nil || !strings.Contains(err.Error(), "--kubernetes-version v1.36.1") {
		t.Errorf("another Kubernetes version: %v", err)
	}
}
