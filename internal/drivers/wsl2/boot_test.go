package wsl2

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/docker"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// chroot runs a node's commands in a root file system on this host, as
// wsl.exe runs them in a distribution before its first boot: same
// programs, same files, no init.
type chroot struct{ dir string }

func (c chroot) Run(ctx context.Context, cmd node.Cmd) error {
	x := exec.CommandContext(ctx, "chroot", append([]string{c.dir}, cmd.Args...)...)
	x.Stdin, x.Stdout, x.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	x.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	err := x.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return &node.ExitError{Code: ee.ExitCode()}
	}
	return err
}

// rootfsTar returns the cached Linux node image's root file system tar, what
// the driver imports.
func rootfsTar(t *testing.T) string {
	t.Helper()
	ms, err := nodeimage.List(state.DefaultDirs().Cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if a, ok := m.Artifacts[nodeimage.FormatTar]; ok && m.OS == string(config.Linux) && m.KubernetesVersion == config.DefaultKubernetesVersion {
			return filepath.Join(m.Dir, a.Path)
		}
	}
	t.Fatal("no cached Linux node image in tar format; build it with `hwk node-image build linux --source source --formats tar` (make test-wsl2 does)")
	return ""
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestNodeBootsFromRootfs checks that a node brought up from the node
// image's rootfs tar through the driver's own steps, with everything
// except wsl.exe, keeps the driver's promises: systemd running, containerd
// active, the kubelet started, the stable address on its interface with
// the node network routed, WSL's network left alone, and no SSH server.
func TestNodeBootsFromRootfs(t *testing.T) {
	// The steps: the tar unpacked as --import unpacks it, the driver's
	// setup run in it through a chroot as wsl.exe would run it before the
	// first boot, then the result booted with systemd as init in a
	// container (WSL boots the distribution's systemd the same way once
	// wsl.conf asks). The kubelet waits for kubeadm, as on every node
	// before init; WSL's network is left alone with systemd-networkd
	// masked.
	if os.Getenv("HWK_WSL2_BOOT_TEST") != "1" {
		t.Skip("boots the Linux node image's rootfs as a WSL node would boot; set HWK_WSL2_BOOT_TEST=1 (make test-wsl2)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("unpacking the rootfs and chroot need root")
	}
	tarball := rootfsTar(t)
	ctx := context.Background()

	start := time.Now()
	root := filepath.Join(t.TempDir(), "rootfs")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "tar", "-x", "-p", "--numeric-owner", "-C", root, "-f", tarball)
	t.Logf("unpacked %s in %s", filepath.Base(tarball), time.Since(start).Round(time.Millisecond))

	subnet := netip.MustParsePrefix("172.31.246.0/24")
	spec := drivers.MachineSpec{Ref: drivers.Ref{Cluster: "wslboot", Name: "wslboot-cp"}, Role: config.ControlPlane, OS: config.Linux,
		IP: netip.MustParseAddr("172.31.246.10")}
	start = time.Now()
	if err := setup(ctx, node.New(spec.Name, config.Linux, chroot{root}), spec, subnet); err != nil {
		t.Fatal(err)
	}
	t.Logf("setup in %s", time.Since(start).Round(time.Millisecond))
	if conf, err := os.ReadFile(filepath.Join(root, "etc/wsl.conf")); err != nil || !strings.Contains(string(conf), "systemd = true") {
		t.Fatalf("wsl.conf: %q %v", conf, err)
	}

	// The container: the docker driver's, as for any node container,
	// from the set-up root.
	d := docker.New()
	if _, err := d.Preflight(ctx); err != nil {
		t.Fatalf("a Docker engine is needed to boot the rootfs: %v", err)
	}
	image := fmt.Sprintf("hwk-test/wsl2-node:%d", time.Now().UnixNano())
	start = time.Now()
	run(t, "sh", "-c", fmt.Sprintf("tar -C %s -c . | docker import -c 'CMD [\"/sbin/init\"]' - %s", root, image))
	t.Logf("imported as %s in %s", image, time.Since(start).Round(time.Millisecond))
	dnet := drivers.Network{Cluster: spec.Cluster, Subnet: netip.MustParsePrefix("172.31.245.0/24")}
	ref := drivers.Ref{Cluster: spec.Cluster, Name: spec.Name}
	t.Cleanup(func() {
		_ = d.Delete(context.Background(), ref)
		_ = d.DeleteNetwork(context.Background(), dnet.Cluster)
		_ = exec.Command("docker", "rmi", "-f", image).Run()
	})
	if err := d.EnsureNetwork(ctx, dnet); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := d.Create(ctx, drivers.MachineSpec{Ref: ref, Role: config.ControlPlane, OS: config.Linux, Image: image,
		CPUs: 2, MemoryBytes: 2 << 30, IP: netip.MustParseAddr("172.31.245.2"), Start: true}); err != nil {
		t.Fatal(err)
	}
	n, err := d.Node(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	var state string
	for time.Since(start) < 3*time.Minute {
		out, _ := n.Output(ctx, "systemctl", "is-system-running")
		state = strings.TrimSpace(out)
		if state == "running" || state == "degraded" {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("systemd %q %s after the container started", state, time.Since(start).Round(100*time.Millisecond))
	if state != "running" {
		failed, _ := n.Output(ctx, "systemctl", "--failed", "--no-legend", "--plain")
		journal, _ := n.Output(ctx, "journalctl", "--no-pager", "-n", "40")
		t.Fatalf("systemd is %q, want running; failed units:\n%s\njournal:\n%s", state, failed, journal)
	}

	show := func(unit string, props ...string) map[string]string {
		out, err := n.Output(ctx, "systemctl", "show", unit, "--property", strings.Join(props, ","))
		if err != nil {
			t.Fatalf("systemctl show %s: %v", unit, err)
		}
		m := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			k, v, _ := strings.Cut(line, "=")
			m[k] = v
		}
		return m
	}
	if s := show("containerd.service", "ActiveState"); s["ActiveState"] != "active" {
		t.Errorf("containerd: %v", s)
	}
	if s := show("hwk-wsl-net.service", "ActiveState", "Result"); s["ActiveState"] != "active" || s["Result"] != "success" {
		t.Errorf("hwk-wsl-net: %v", s)
	}
	// Before kubeadm writes its config the kubelet exits and systemd
	// restarts it: started, and waiting for kubeadm.
	k := show("kubelet.service", "ActiveState", "UnitFileState", "ExecMainStartTimestampMonotonic", "NRestarts")
	if k["UnitFileState"] != "enabled" || k["ExecMainStartTimestampMonotonic"] == "0" || k["ActiveState"] == "inactive" || k["ActiveState"] == "failed" {
		t.Errorf("kubelet: %v", k)
	}
	t.Logf("kubelet: %v", k)
	for _, unit := range []string{"systemd-networkd.service", "ssh.service"} {
		if s := show(unit, "UnitFileState", "ActiveState"); s["UnitFileState"] != "masked" || s["ActiveState"] != "inactive" {
			t.Errorf("%s: %v, want masked and inactive", unit, s)
		}
	}

	addrs, _ := n.Output(ctx, "ip", "-4", "-o", "addr", "show")
	if !strings.Contains(addrs, " 172.31.246.10/32 ") {
		t.Errorf("the node's stable address is not on its interface:\n%s", addrs)
	}
	route, _ := n.Output(ctx, "ip", "-4", "route", "get", "172.31.246.20")
	if !strings.Contains(route, " src 172.31.246.10 ") {
		t.Errorf("the node network is not routed from the node's address: %s", route)
	}
	journal, _ := n.Output(ctx, "journalctl", "--no-pager", "-u", "hwk-wsl-net", "-o", "cat")
	t.Logf("hwk-wsl-net: %s", strings.TrimSpace(journal))
}
