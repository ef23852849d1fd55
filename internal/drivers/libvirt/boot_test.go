package libvirt

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/internal/sshkey"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// bootImage returns the Linux node image's qcow2: HWK_LIBVIRT_IMAGE, else the
// newest cached one for the default Kubernetes version.
func bootImage(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HWK_LIBVIRT_IMAGE"); p != "" {
		return p
	}
	ms, err := nodeimage.List(state.DefaultDirs().Cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if a, ok := m.Artifacts[nodeimage.FormatQCOW2]; ok && m.OS == string(config.Linux) && m.KubernetesVersion == config.DefaultKubernetesVersion {
			return filepath.Join(m.Dir, a.Path)
		}
	}
	t.Fatalf("no cached Linux node image in qcow2 format; build it with `hwk node-image build linux --source source --formats qcow2` (make test-libvirt does)")
	return ""
}

// TestBootOnSystemLibvirt checks, on the system libvirt (under TCG without
// a working KVM), that a node made from the Linux node image takes its
// reserved address by DHCP, answers SSH with the cluster key and its pinned
// host key only, boots on a thin overlay, grows its root into a larger
// disk, stops and starts again, and that Delete leaves nothing behind.
func TestBootOnSystemLibvirt(t *testing.T) {
	if os.Getenv("HWK_LIBVIRT_BOOT_TEST") != "1" {
		t.Skip("boots the Linux node image in a VM; set HWK_LIBVIRT_BOOT_TEST=1 (make test-libvirt)")
	}
	image := bootImage(t)
	daemon(t, golibvirt.QEMUSystem) // skips or fails when no libvirtd runs
	ctx := context.Background()
	dirs := state.Dirs{Data: t.TempDir(), Cache: t.TempDir(), Config: t.TempDir()}
	d := New(Options{Dirs: dirs})
	const cluster = "boot"
	ref := drivers.Ref{Cluster: cluster, Name: "boot-cp"}
	n := drivers.Network{Cluster: cluster, Subnet: netip.MustParsePrefix("172.31.248.0/24")}
	t.Cleanup(func() {
		_ = d.Delete(context.Background(), ref)
		_ = d.DeleteNetwork(context.Background(), cluster)
	})

	start := time.Now()
	detail, err := d.Preflight(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("preflight (%s): %s; emulated: %v", time.Since(start).Round(time.Millisecond), detail, d.Emulated())
	accelFile := filepath.Join(dirs.Cache, "libvirt", "accel.json")
	if _, err := os.Stat(accelFile); !os.IsNotExist(err) {
		t.Errorf("preflight wrote %s (%v); only making machines may", accelFile, err)
	}
	if err := d.EnsureNetwork(ctx, n); err != nil {
		t.Fatal(err)
	}
	virtual, err := qcow2Size(image)
	if err != nil {
		t.Fatal(err)
	}
	// A disk 2 GiB larger than the image, which the guest must grow its
	// root partition and file system into at boot.
	spec := drivers.MachineSpec{
		Ref: ref, Role: config.ControlPlane, OS: config.Linux, Image: image,
		CPUs: 2, MemoryBytes: 2 << 30, DiskBytes: int64(virtual) + 2<<30,
		IP: netip.MustParseAddr("172.31.248.10"), Start: true, Autostart: true,
	}
	if err := d.CheckImage(ctx, image); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := d.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	created := time.Since(start)
	if data, err := os.ReadFile(accelFile); err != nil || !strings.Contains(string(data), `"kvm":`) {
		t.Errorf("create kept no acceleration verdict: %s (%v)", data, err)
	}
	h := waitSSH(t, d, ref, 8*time.Minute)
	t.Logf("create: %s; boot to SSH: %s (%s emulation)", created.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond),
		map[bool]string{true: "TCG", false: "no"}[d.Emulated()])

	state, err := h.Output(ctx, "systemctl", "is-system-running", "--wait")
	if strings.TrimSpace(state) != "running" {
		failed, _ := h.Output(ctx, "systemctl", "--failed", "--no-legend")
		t.Errorf("systemctl is-system-running: %q (%v); failed units:\n%s", state, err, failed)
	}
	t.Logf("systemctl is-system-running: %s after %s", strings.TrimSpace(state), time.Since(start).Round(100*time.Millisecond))
	if name, _ := h.Output(ctx, "hostname"); strings.TrimSpace(name) != "boot-cp" {
		t.Errorf("hostname %q, want boot-cp", name)
	}
	if addr, _ := h.Output(ctx, "ip", "-4", "-o", "addr", "show", "scope", "global"); !strings.Contains(addr, "172.31.248.10/24") {
		t.Errorf("the node's addresses: %s", addr)
	}
	if out, err := h.Output(ctx, "systemctl", "is-active", "containerd"); err != nil {
		t.Errorf("containerd: %s (%v)", out, err)
	}

	m, err := d.Inspect(ctx, ref)
	if err != nil || m.State != drivers.StateRunning || m.IP != spec.IP || m.Role != config.ControlPlane || m.OS != config.Linux {
		t.Errorf("inspect: %+v (%v)", m, err)
	}
	if ms, err := d.List(ctx, cluster); err != nil || len(ms) != 1 || ms[0].Name != "boot-cp" {
		t.Errorf("list: %+v (%v)", ms, err)
	}
	if ep, err := d.HostEndpoint(ctx, ref, 6443); err != nil || ep.String() != "172.31.248.10:6443" {
		t.Errorf("host endpoint %s (%v)", ep, err)
	}
	// Creating again changes nothing.
	if err := d.Create(ctx, spec); err != nil {
		t.Errorf("second create: %v", err)
	}

	checkPinned(t, d, ref, spec.IP)
	checkOverlay(t, ref, spec.DiskBytes)
	checkGrown(ctx, t, h, int64(virtual), spec.DiskBytes)
	if log, err := os.ReadFile(d.ConsoleLog(ref)); err != nil || !strings.Contains(string(log), "hwk-seed: address by DHCP (reserved: 172.31.248.10/24)") {
		t.Errorf("console log %s (%v) does not show hwk-seed's DHCP line; last lines:\n%s", d.ConsoleLog(ref), err, hostexec.LastLines(string(log), 15))
	}

	if out, err := exec.Command("virsh", "-c", "qemu:///system", "dominfo", "boot-cp").CombinedOutput(); err != nil || !regexp.MustCompile(`(?m)^Autostart:\s+enable`).Match(out) {
		t.Errorf("a node made with Autostart does not autostart: %v\n%s", err, out)
	}
	hostKey, err := h.Output(ctx, "cat", "/etc/ssh/ssh_host_ed25519_key.pub")
	if err != nil {
		t.Fatal(err)
	}

	// Stop asks the guest to shut down; start boots it again.
	start = time.Now()
	if err := d.Stop(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if m, _ := d.Inspect(ctx, ref); m.State != drivers.StateStopped {
		t.Errorf("after stop: %+v", m)
	}
	t.Logf("stop (ACPI shutdown): %s", time.Since(start).Round(100*time.Millisecond))
	if err := d.Stop(ctx, ref); err != nil {
		t.Errorf("second stop: %v", err)
	}
	start = time.Now()
	if err := d.Start(ctx, ref); err != nil {
		t.Fatal(err)
	}
	h = waitSSH(t, d, ref, 8*time.Minute)
	t.Logf("start to SSH: %s", time.Since(start).Round(100*time.Millisecond))
	if name, err := h.Output(ctx, "hostname"); err != nil || strings.TrimSpace(name) != "boot-cp" {
		t.Errorf("after restart: hostname %q (%v)", name, err)
	}
	// The same address and the same host key: the handle that answered
	// checks the key pinned at the first boot, and the key on disk is
	// the one read before the stop.
	if m, err := d.Inspect(ctx, ref); err != nil || m.IP != spec.IP {
		t.Errorf("after restart: inspect %+v (%v), want %s", m, err, spec.IP)
	}
	if addr, _ := h.Output(ctx, "ip", "-4", "-o", "addr", "show", "scope", "global"); !strings.Contains(addr, "172.31.248.10/24") {
		t.Errorf("after restart the node's addresses: %s", addr)
	}
	if again, err := h.Output(ctx, "cat", "/etc/ssh/ssh_host_ed25519_key.pub"); err != nil || again != hostKey {
		t.Errorf("after restart the host key is %q (%v), before %q", again, err, hostKey)
	}
	checkPinned(t, d, ref, spec.IP)

	// Delete, twice: nothing of the node or its cluster is left.
	for range 2 {
		if err := d.Delete(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DeleteNetwork(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	virsh := func(args ...string) string {
		out, err := exec.Command("virsh", append([]string{"-c", "qemu:///system"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("virsh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := virsh("list", "--all", "--name"); strings.Contains(out, "boot-cp") {
		t.Errorf("virsh list --all still shows boot-cp:\n%s", out)
	}
	if out := virsh("net-list", "--all", "--name"); strings.Contains(out, NetworkName(cluster)) {
		t.Errorf("virsh net-list --all still shows %s:\n%s", NetworkName(cluster), out)
	}
	virsh("pool-refresh", poolName)
	if out := virsh("vol-list", poolName); strings.Contains(out, cluster+"_") {
		t.Errorf("virsh vol-list %s still shows the node's volumes:\n%s", poolName, out)
	}
	for _, f := range []string{overlayName(ref), seedName(ref), nvramName(ref)} {
		if _, err := os.Stat(filepath.Join(poolDir, f)); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", f, err)
		}
	}
	clusterDir := filepath.Join(dirs.Data, "clusters", cluster)
	if entries, err := os.ReadDir(clusterDir); err == nil && len(entries) > 0 {
		t.Errorf("the cluster directory still holds %v", entries)
	}
}

// waitSSH waits until the node answers a command over SSH.
func waitSSH(t *testing.T, d *Driver, ref drivers.Ref, timeout time.Duration) *node.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		h, err := d.Node(ctx, ref)
		if err == nil {
			if _, err = h.Output(ctx, "true"); err == nil {
				return h
			}
		}
		last = err
		time.Sleep(time.Second)
	}
	log, _ := os.ReadFile(d.ConsoleLog(ref))
	t.Fatalf("node %s did not answer SSH within %s: %v\nlast console lines:\n%s", ref.Name, timeout, last, hostexec.LastLines(string(log), 30))
	return nil
}

// checkPinned checks that the same address with any other host key pinned
// is refused, so the handle really checks the node's identity.
func checkPinned(t *testing.T, d *Driver, ref drivers.Ref, ip netip.Addr) {
	t.Helper()
	key, err := sshkey.Load(d.files().Paths(ref).ClusterKey)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := key.Signer()
	other, _ := sshkey.New("not the node")
	otherPub, _ := other.PublicKey()
	tr, err := node.NewSSH(node.SSHConfig{Addr: netip.AddrPortFrom(ip, 22).String(), User: "root", Key: signer, HostKey: otherPub, Shell: node.POSIX})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	err = node.New(ref.Name, config.Linux, tr).Run(context.Background(), node.Cmd{Args: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "host key mismatch") {
		t.Errorf("SSH with another host key pinned: %v, want a host key mismatch", err)
	}
}

// checkOverlay checks that the node's disk is a thin qcow2 of size bytes
// over the base volume, and logs how much the boot wrote to it.
func checkOverlay(t *testing.T, ref drivers.Ref, size int64) {
	t.Helper()
	out, err := exec.Command("qemu-img", "info", "--force-share", "--output=json", filepath.Join(poolDir, overlayName(ref))).Output()
	if err != nil {
		t.Fatalf("qemu-img info: %v", err)
	}
	var info struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
		ActualSize  int64  `json:"actual-size"`
		Backing     string `json:"full-backing-filename"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	t.Logf("overlay %s after boot: %.1f MiB written (virtual %d GiB), backing %s", overlayName(ref), float64(info.ActualSize)/(1<<20), info.VirtualSize>>30, info.Backing)
	if info.Format != "qcow2" || !strings.HasPrefix(filepath.Base(info.Backing), "base_") || info.VirtualSize != size {
		t.Errorf("overlay: %+v", info)
	}
	// A full copy of the image would be about 1 GiB.
	if info.ActualSize > 512<<20 {
		t.Errorf("the overlay holds %d MiB after boot; it should hold only the node's writes", info.ActualSize>>20)
	}
}

// checkGrown checks that the guest grew its root partition to the end of
// its disk of disk bytes and the root file system into the partition: it
// must hold more than the whole image could (image bytes), and miss the
// disk by no more than the ESP, the GPT and ext4's own metadata.
func checkGrown(ctx context.Context, t *testing.T, h *node.Node, image, disk int64) {
	t.Helper()
	// df's size is the file system's blocks less its metadata; lsblk's
	// are the partition's and the disk's sizes as the kernel sees them.
	out, err := h.Output(ctx, "sh", "-c", `set -e
root=$(findmnt -n -o SOURCE /)
echo "$(lsblk -b -n -d -o SIZE "/dev/$(lsblk -n -o PKNAME "$root")") $(lsblk -b -n -d -o SIZE "$root") $(df -B1 --output=size / | tail -n 1)"`)
	if err != nil {
		t.Fatalf("root file system sizes: %v\n%s", err, out)
	}
	var dev, part, fs int64
	if _, err := fmt.Sscan(out, &dev, &part, &fs); err != nil {
		t.Fatalf("root file system sizes %q: %v", out, err)
	}
	t.Logf("disk %.2f GiB, root partition %.2f GiB, root file system %.2f GiB (image %.2f GiB)",
		float64(dev)/(1<<30), float64(part)/(1<<30), float64(fs)/(1<<30), float64(image)/(1<<30))
	if dev != disk {
		t.Errorf("the guest's disk is %d bytes, want %d", dev, disk)
	}
	// The ESP takes 256 MiB and the backup GPT 1 MiB (diskimage's
	// layout); ext4's journal, inode tables and reserved blocks take a
	// few per cent.
	if part < disk-300<<20 {
		t.Errorf("the root partition is %d bytes of a %d-byte disk: it was not grown to the disk's end", part, disk)
	}
	if fs <= image || fs < part*9/10 {
		t.Errorf("the root file system is %d bytes on a %d-byte partition (image %d bytes): it was not grown into the partition", fs, part, image)
	}
	if out, err := h.Output(ctx, "systemctl", "is-active", "systemd-repart.service", "hwk-growfs-root.service"); err != nil {
		log, _ := h.Output(ctx, "journalctl", "-b", "-o", "cat", "-u", "systemd-repart.service", "-u", "hwk-growfs-root.service")
		t.Errorf("systemd-repart and hwk-growfs-root: %s (%v)\n%s", out, err, log)
	}
	// udev reads hwk's rule that onlines hot-added memory (Hyper-V's
	// Dynamic Memory) without complaint; libvirt adds none to see it act.
	// (udev 252 seen here: "Reading rules file: PATH", and
	// "PATH:2 Invalid key 'ATTRX'" for a broken rule.)
	if out, err := h.Output(ctx, "sh", "-c", "udevadm test /sys/devices/system/memory/memory0 2>&1"); err != nil ||
		!strings.Contains(out, "Reading rules file: /etc/udev/rules.d/40-hwk-memory-hotadd.rules") ||
		strings.Contains(out, "/etc/udev/rules.d/40-hwk-memory-hotadd.rules:") { // udev names a rule it cannot parse FILE:LINE
		t.Errorf("udev and hwk's memory rule: %v\n%s", err, out)
	}
}
