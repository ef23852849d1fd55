package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/drivers/hyperv"
	"github.com/hwk-dev/hwk/internal/drivers/wsl2"
	"github.com/hwk-dev/hwk/internal/testing/hypervtest"
	"github.com/hwk-dev/hwk/internal/testing/wsltest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// TestWSLUpDown checks `hwk up` and `hwk down` of a control plane on the
// wsl2 driver and a Windows worker on hyperv, through both drivers' real
// process code: up routes the worker and the host to the distribution and
// the kubeconfig reaches it on 127.0.0.1; down undoes it all.
func TestWSLUpDown(t *testing.T) {
	// A fake wsl.exe (internal/drivers/wsl2/testdata/transcripts/
	// up-down.txt) and a fake powershell.exe (internal/drivers/hyperv/
	// testdata/transcripts/wsl2-up-down.txt), each first on PATH, fail
	// what they do not expect. The control plane's distribution is
	// imported, set up and started, the host routes its address to WSL's
	// VM, the Windows worker routes it through the host before it joins;
	// down unroutes and unregisters it and removes the worker and the
	// network.
	ps := hypervtest.New(t, "wsl2-up-down.txt")
	// The API server's port must be free on this host (the driver
	// checks: WSL forwards it from the host's loopback).
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	u := newUpDown(t, config.DriverWSL2, config.DriverHyperV, config.DriverHyperV, func(cfg *config.Cluster) { cfg.Networking.APIServerPort = port })
	dirs, kc, cfg, nodes := u.dirs, u.kc, u.cfg, u.nodes
	tarball := cachedTar(t, dirs.Cache, "linux-test", cfg.KubernetesVersion)
	cachedVHDX(t, dirs.Cache, "windows-2022-test", cfg.KubernetesVersion, &nodeimage.Windows{Version: cfg.Nodes[1].WindowsVersion, Build: 20348})
	nodeDir := filepath.Join(dirs.Data, "clusters", "demo", "wsl2", "demo-cp")
	wsl := wsltest.New(t, "up-down.txt", map[string]string{"NODEDIR": nodeDir, "TAR": tarball})
	profile := t.TempDir()

	command := func(fn func(p *Provider) error) {
		t.Helper()
		s := hyperv.NewSession(io.Discard)
		defer s.Close()
		hv := hyperv.New(hyperv.Options{Dirs: dirs, Runner: s, Handle: nodes.handle})
		w := wsl2.New(wsl2.Options{Dirs: dirs, Profile: profile, PowerShell: s, Handle: func(name string) *node.Node {
			n, _ := nodes.handle(name, config.Linux, netip.Addr{})
			return n
		}})
		if err := fn(u.provider(hv, w)); err != nil {
			t.Fatalf("%v\nPowerShell scripts sent:\n%s\nwsl.exe calls: %q", err, ps.Requests(), wsl.Calls())
		}
	}
	ctx := context.Background()
	command(func(p *Provider) error {
		_, err := p.Up(ctx, cfg, upOptions)
		return err
	})
	ps.Check(t)
	nodes.check(t)
	scripts := ps.Requests()
	for _, rule := range []string{"make the switch", "address and NAT", "create demo-win-1", "route demo-cp's address to WSL's VM"} {
		if !strings.Contains(scripts, "# --- "+rule+"\n") {
			t.Errorf("up sent no script of rule %q", rule)
		}
	}
	if got, want := nodes.ran("demo-win-1"), []string{"containerd running", "windows build", "route to the control plane", "copy", "kubeadm join", "calico network", "route to the control plane", "restart kubelet"}; strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("the Windows node ran %v, want %v", got, want)
	}
	if got := nodes.ran("demo-cp"); len(got) == 0 || got[0] != "containerd running" {
		t.Errorf("the WSL control plane ran %v", got)
	}
	data, err := os.ReadFile(kc.Explicit)
	if err != nil || !bytes.Contains(data, []byte(fmt.Sprintf("https://127.0.0.1:%d", cfg.Networking.APIServerPort))) {
		t.Errorf("kubeconfig: %v\n%s", err, data)
	}

	n := len(scripts)
	command(func(p *Provider) error {
		found, err := p.Down(ctx, "demo")
		if !found {
			t.Error("down found no cluster")
		}
		return err
	})
	ps.Check(t)
	wsl.Check(t)
	down := ps.Requests()[n:]
	for _, rule := range []string{"remove demo-cp's route", "delete demo-win-1", "delete the network"} {
		if !strings.Contains(down, "# --- "+rule+"\n") {
			t.Errorf("down sent no script of rule %q:\n%s", rule, down)
		}
	}
	if _, err := os.Stat(filepath.Join(dirs.Data, "clusters", "demo")); !os.IsNotExist(err) {
		t.Errorf("down left the cluster's directory: %v", err)
	}
}

// cachedTar puts a node image with a rootfs tar in the cache and returns
// the tar's path.
func cachedTar(t *testing.T, cache, name, version string) string {
	t.Helper()
	var tar string
	cachedImage(t, cache, name, version, nil, nodeimage.FormatTar, "rootfs.tar.gz", func(path string) int64 {
		tar = path
		data := []byte("a rootfs tar")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return int64(len(data))
	})
	return tar
}
