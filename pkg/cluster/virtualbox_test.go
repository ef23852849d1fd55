package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/drivers/virtualbox"
	"github.com/hwk-dev/hwk/internal/testing/vboxtest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// TestVirtualBoxUpDown checks `hwk up` and `hwk down` of a Linux control
// plane and a Windows worker on the VirtualBox driver, every VirtualBox call
// spawned as a real process.
func TestVirtualBoxUpDown(t *testing.T) {
	u := newUpDown(t, config.DriverVirtualBox, config.DriverVirtualBox, config.DriverVirtualBox, nil)
	dirs, kc, cfg, nodes := u.dirs, u.kc, u.cfg, u.nodes
	// A fake VBoxManage first on PATH answers from a transcript in
	// VBoxManage's own formats (internal/drivers/virtualbox/testdata) and
	// fails what it does not expect. The nodes' side is scripted node
	// handles and the API server an in-memory cluster, as in
	// TestHyperVUpDown.
	fake := vboxtest.New(t, "up-down.txt", map[string]string{"DATA": dirs.Data, "CACHE": dirs.Cache})
	cachedVDI(t, dirs.Cache, "linux-test", cfg.KubernetesVersion, "4f3a1c52-8d0e-4b7a-9e61-2c5d7f80a913", 20<<30, nil)
	cachedVDI(t, dirs.Cache, "windows-2022-test", cfg.KubernetesVersion, "b07e2d94-61c3-4f25-8a1e-93d4c6e5f208", 64<<30,
		&nodeimage.Windows{Version: cfg.Nodes[1].WindowsVersion, Build: 20348})
	provider := func() *Provider {
		p := u.provider(virtualbox.New(virtualbox.Options{Dirs: dirs, Runner: &virtualbox.CLI{}, Handle: nodes.handle,
			Hypervisor: func(context.Context) (bool, error) { return false, nil }}))
		// VirtualBox gives a VM all its memory at start: the default
		// cluster's 10 GiB need a roomier host than the laptop.
		p.hostMemory = func() (uint64, uint64, error) { return 32 << 30, 16 << 30, nil }
		return p
	}
	ctx := context.Background()
	res, err := provider().Up(ctx, cfg, upOptions)
	if err != nil {
		t.Fatalf("up: %v\nVBoxManage calls:\n%s", err, calls(fake))
	}
	nodes.check(t)
	if res == nil || res.Context != "hwk-demo" {
		t.Errorf("up: %+v", res)
	}
	if got, want := nodes.ran("demo-win-1"), []string{"containerd running", "windows build", "copy", "kubeadm join", "calico network", "restart kubelet"}; strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("the Windows node ran %v, want %v", got, want)
	}
	// The API server is reached through the loopback port forwarded to
	// it, which the driver chose and VBoxManage was told.
	data, err := os.ReadFile(kc.Explicit)
	server := regexp.MustCompile(`server: https://127\.0\.0\.1:(\d+)`).FindSubmatch(data)
	if err != nil || server == nil {
		t.Fatalf("kubeconfig: %v\n%s", err, data)
	}
	forward := fmt.Sprintf("demo-cp-6443:tcp:[127.0.0.1]:%s:[172.31.250.10]:6443", server[1])
	if !strings.Contains(calls(fake), forward) {
		t.Errorf("the kubeconfig's port %s is not the one forwarded:\n%s", server[1], calls(fake))
	}
	n := len(fake.Calls())

	found, err := provider().Down(ctx, "demo")
	if err != nil || !found {
		t.Fatalf("down: %v %v\nVBoxManage calls:\n%s", found, err, calls(fake))
	}
	fake.Check(t)
	if _, err := os.Stat(filepath.Join(dirs.Data, "clusters", "demo")); !os.IsNotExist(err) {
		t.Errorf("down left the cluster's directory: %v", err)
	}
	t.Logf("up: %d VBoxManage calls, down: %d", n, len(fake.Calls())-n)
}

func calls(f *vboxtest.Fake) string {
	var b bytes.Buffer
	for _, c := range f.Calls() {
		fmt.Fprintln(&b, strings.Join(c, " "))
	}
	return b.String()
}

// cachedVDI puts a node image with a VDI disk in the cache.
func cachedVDI(t *testing.T, cache, name, version, uuid string, size int64, win *nodeimage.Windows) {
	t.Helper()
	cachedImage(t, cache, name, version, win, nodeimage.FormatVDI, "disk.vdi", func(path string) int64 {
		vboxtest.WriteVDI(t, path, uuid, size)
		return 512
	})
}
