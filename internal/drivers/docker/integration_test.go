package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/testing/enginefile"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// requireDocker returns the driver and a client of its engine, which these
// tests need. Without one they skip, unless HWK_REQUIRE_DOCKER=1 (set by
// .ci/run), where a missing engine fails them.
func requireDocker(t *testing.T) (*Driver, *client.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test; -short skips it")
	}
	d := New()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.Preflight(ctx); err != nil {
		if os.Getenv("HWK_REQUIRE_DOCKER") == "1" {
			t.Fatalf("HWK_REQUIRE_DOCKER=1 but: %v", err)
		}
		t.Skipf("no Docker engine: %v", err)
	}
	c, err := d.client()
	if err != nil {
		t.Fatal(err)
	}
	return d, c
}

// busyboxImage imports a tiny image made of a static Linux busybox
// (staticBusybox): a locally built node stand-in with sh, cat, mount, ip
// and sha256sum.
func busyboxImage(t *testing.T, c *client.Client) string {
	t.Helper()
	bin := staticBusybox(t, c)
	applets := []string{"sh", "cat", "mount", "mkdir", "ip", "sha256sum", "sleep", "true", "dirname", "chmod", "mv", "rm", "rmdir", "test", "echo", "head", "ls", "stat"}
	sum := sha256.Sum256(append(bin, strings.Join(applets, " ")+"v2"...))
	ref := "hwk-test/busybox:" + hex.EncodeToString(sum[:6])
	ctx := context.Background()
	if _, err := c.ImageInspect(ctx, ref); err == nil {
		return ref
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "bin/", Mode: 0o755}))
	must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin))}))
	_, err := tw.Write(bin)
	must(t, err)
	for _, a := range applets {
		must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}))
	}
	for _, dir := range []string{"tmp/", "run/", "proc/", "sys/", "dev/", "etc/", "var/lib/containerd/", "lib/modules/", "usr/local/bin/"} {
		must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755}))
	}
	must(t, tw.Close())
	_, err = c.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: []string{
			// Halt on SIGRTMIN+3 (37), the stop signal meant for systemd.
			`CMD ["/bin/sh", "-c", "trap 'exit 0' 37 TERM; sleep 3600 & wait"]`,
			`ENV PATH=/bin`,
		}})
	must(t, err)
	return ref
}

// staticBusybox returns the bytes of a static Linux busybox at
// /bin/busybox: the host's on Linux; on a Windows host, which has no Linux
// programs of its own, the one on the engine's machine (Docker Desktop's
// Linux VM, or under Wine the Linux machine running the test).
func staticBusybox(t *testing.T, c *client.Client) []byte {
	t.Helper()
	const path = "/bin/busybox"
	where := "at " + path
	var bin []byte
	var err error
	if runtime.GOOS == "windows" {
		where += " on the Docker engine's machine"
		// Read through the engine: bound into a container that never
		// starts, of an image holding one empty directory, and copied out
		// of it (GET /containers/{id}/archive mounts a container's volumes
		// and bind mounts for the copy, started or not).
		bin, err = enginefile.Read(t, c, path)
	} else {
		bin, err = os.ReadFile(path)
	}
	if err != nil {
		t.Fatalf("this test needs a static busybox %s (Debian: busybox-static): %v", where, err)
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("the busybox %s is not a Linux program: %v", where, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("the busybox %s is not static (Debian: busybox-static)", where)
		}
	}
	return bin
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testCluster returns a unique cluster name and a /24 no docker network
// uses yet, and removes whatever the test leaves behind.
func testCluster(t *testing.T, d *Driver, c *client.Client) (string, netip.Prefix) {
	t.Helper()
	name := fmt.Sprintf("it%d", time.Now().UnixNano()%1e8)
	nets, err := c.NetworkList(context.Background(), client.NetworkListOptions{})
	must(t, err)
	var subnet netip.Prefix
	for range 100 {
		n, _ := rand.Int(rand.Reader, big.NewInt(200))
		p := netip.MustParsePrefix(fmt.Sprintf("172.30.%d.0/24", 20+n.Int64()))
		if overlappingNetwork(nets.Items, p) == "" && drivers.OverlappingInterface(p) == "" {
			subnet = p
			break
		}
	}
	if !subnet.IsValid() {
		t.Fatal("no free /24 in 172.30.0.0/16 for the test network")
	}
	t.Cleanup(func() {
		ctx := context.Background()
		ms, _ := d.List(ctx, name)
		for _, m := range ms {
			_ = d.Delete(ctx, m.Ref)
		}
		_ = d.DeleteNetwork(ctx, name)
	})
	return name, subnet
}

func spec(cluster, name string, role config.Role, image string, ip netip.Addr) drivers.MachineSpec {
	return drivers.MachineSpec{
		Ref: drivers.Ref{Cluster: cluster, Name: name}, Role: role, OS: config.Linux,
		Image: image, CPUs: 1, MemoryBytes: 256 << 20, IP: ip, Start: true,
	}
}

func TestTwoNodeCluster(t *testing.T) {
	d, c := requireDocker(t)
	ctx := context.Background()
	img := busyboxImage(t, c)
	cluster, subnet := testCluster(t, d, c)
	netw := drivers.Network{Cluster: cluster, Subnet: subnet}
	must(t, d.EnsureNetwork(ctx, netw))
	must(t, d.EnsureNetwork(ctx, netw)) // idempotent

	base := subnet.Addr().As4()
	ipOf := func(last byte) netip.Addr { b := base; b[3] = last; return netip.AddrFrom4(b) }
	cp := spec(cluster, cluster+"-cp", config.ControlPlane, img, ipOf(10))
	cp.Ports = []uint16{6443}
	cp.Seed = drivers.Seed{
		SSHAuthorizedKeys: []string{"ssh-ed25519 AAAATEST hwk"},
		Files:             []drivers.File{{Path: "/etc/hwk/seed.txt", Mode: 0o640, Content: []byte("seeded\n")}},
	}
	w := spec(cluster, cluster+"-linux-1", config.Worker, img, ipOf(11))
	for _, s := range []drivers.MachineSpec{cp, w} {
		must(t, d.Create(ctx, s))
		must(t, d.Create(ctx, s)) // idempotent
	}

	nodes := map[string]*node.Node{}
	for _, s := range []drivers.MachineSpec{cp, w} {
		m, err := d.Inspect(ctx, s.Ref)
		must(t, err)
		if m.State != drivers.StateRunning || m.IP != s.IP || m.Role != s.Role || m.OS != config.Linux {
			t.Fatalf("Inspect(%s) = %+v, want running at %s as %s", s.Name, m, s.IP, s.Role)
		}
		n, err := d.Node(ctx, s.Ref)
		must(t, err)
		if n.Shell() != node.POSIX || n.OS() != config.Linux {
			t.Errorf("node %s: shell %v os %s", s.Name, n.Shell(), n.OS())
		}
		out, err := n.Output(ctx, "ip", "-4", "-o", "addr", "show", "eth0")
		must(t, err)
		if !strings.Contains(out, s.IP.String()+"/24") {
			t.Errorf("node %s eth0 = %q, want %s/24", s.Name, out, s.IP)
		}
		nodes[s.Name] = n
	}
	n := nodes[cp.Name]

	// Output, stderr and exit status come back apart.
	var stdout, stderr bytes.Buffer
	// With TTY the command gets a terminal of that size (set just after
	// the start on engines before API 1.42, hence the short wait); without,
	// none.
	var tty bytes.Buffer
	must(t, n.Run(ctx, node.Cmd{Args: []string{"sh", "-c", "tty; for i in 1 2 3 4 5 6 7 8 9 10; do stty -a | grep -q 'rows 33' && break; sleep 0.2; done; stty -a | head -1"}, Stdout: &tty, TTY: &node.TermSize{Rows: 33, Cols: 101}}))
	if !strings.Contains(tty.String(), "/dev/pts/") || !strings.Contains(tty.String(), "rows 33; columns 101") {
		t.Errorf("with a TTY: %q", tty.String())
	}
	if out, _ := n.Output(ctx, "sh", "-c", "tty || true"); !strings.Contains(out, "not a tty") {
		t.Errorf("without a TTY: %q", out)
	}
	err := n.Run(ctx, node.Cmd{Args: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Stdout: &stdout, Stderr: &stderr})
	var ee *node.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || ee.Node != cp.Name || strings.TrimSpace(ee.Stderr) != "err" {
		t.Fatalf("exit 3: err = %#v", err)
	}
	if stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	if out, err := n.Output(ctx, "cat", "/etc/hwk/seed.txt", "/root/.ssh/authorized_keys"); err != nil || out != "seeded\nssh-ed25519 AAAATEST hwk\n" {
		t.Errorf("seed files: %q, %v", out, err)
	}
	if out, _ := n.Output(ctx, "stat", "-c", "%a", "/root/.ssh", "/root/.ssh/authorized_keys", "/etc/hwk/seed.txt"); out != "700\n600\n640\n" {
		t.Errorf("authorized_keys mode: %q", out)
	}

	// A 10 MB stream in, checked by SHA-256 on the node.
	data := make([]byte, 10<<20)
	_, _ = rand.Read(data)
	want := sha256.Sum256(data)
	start := time.Now()
	must(t, n.CopyTo(ctx, bytes.NewReader(data), "/var/tmp/blob/ten.bin", 0o644))
	t.Logf("copied 10 MiB in %s", time.Since(start).Round(time.Millisecond))
	out, err := n.Output(ctx, "sha256sum", "/var/tmp/blob/ten.bin")
	must(t, err)
	if got := strings.Fields(out)[0]; got != hex.EncodeToString(want[:]) {
		t.Fatalf("sha256 on node %s, want %x", got, want)
	}
	// A broken source fails the copy and leaves no file behind.
	err = n.CopyTo(ctx, io.MultiReader(bytes.NewReader(data[:1000]), errReader{}), "/var/tmp/blob/broken.bin", 0o644)
	if err == nil || !strings.Contains(err.Error(), "read input") {
		t.Errorf("copy from a failing reader: %v", err)
	}

	// Each node is its own cgroup root: what one node's kubelet would
	// make at /kubepods is not seen by the other.
	mk := `if [ -f /sys/fs/cgroup/cgroup.controllers ]; then d=/sys/fs/cgroup/kubepods; else d=/sys/fs/cgroup/pids/kubepods; fi; mkdir "$d" && echo "$d"`
	dir, err := n.Output(ctx, "sh", "-c", mk)
	must(t, err)
	dir = strings.TrimSpace(dir)
	if err := nodes[w.Name].Run(ctx, node.Cmd{Args: []string{"test", "!", "-e", dir}}); err != nil {
		t.Errorf("%s made on %s is visible on %s: %v", dir, cp.Name, w.Name, err)
	}
	must(t, n.Run(ctx, node.Cmd{Args: []string{"rmdir", dir}}))

	ep, err := d.HostEndpoint(ctx, cp.Ref, 6443)
	must(t, err)
	if ep.Addr() != netip.MustParseAddr("127.0.0.1") || ep.Port() == 0 {
		t.Errorf("API server endpoint %s, want 127.0.0.1:<port>", ep)
	}

	if res, err := c.ContainerInspect(ctx, cp.Name, client.ContainerInspectOptions{}); err != nil || res.Container.HostConfig.RestartPolicy.Name != "unless-stopped" {
		t.Errorf("restart policy of %s: %+v %v; want unless-stopped, so nodes come back with the engine", cp.Name, res.Container.HostConfig, err)
	}

	// Stop and start keep the addresses and the API server's host port.
	for _, s := range []drivers.MachineSpec{cp, w} {
		must(t, d.Stop(ctx, s.Ref))
		must(t, d.Stop(ctx, s.Ref))
		if m, _ := d.Inspect(ctx, s.Ref); m.State != drivers.StateStopped {
			t.Errorf("after stop %s is %s", s.Name, m.State)
		}
	}
	for _, s := range []drivers.MachineSpec{cp, w} {
		must(t, d.Start(ctx, s.Ref))
		must(t, d.Start(ctx, s.Ref))
		m, err := d.Inspect(ctx, s.Ref)
		must(t, err)
		if m.State != drivers.StateRunning || m.IP != s.IP {
			t.Errorf("after restart %s is %s at %s, want running at %s", s.Name, m.State, m.IP, s.IP)
		}
		n, err := d.Node(ctx, s.Ref)
		must(t, err)
		if out, err := n.Output(ctx, "ip", "-4", "-o", "addr", "show", "eth0"); err != nil || !strings.Contains(out, s.IP.String()+"/") {
			t.Errorf("after restart %s eth0: %q %v", s.Name, out, err)
		}
	}

	if again, err := d.HostEndpoint(ctx, cp.Ref, 6443); err != nil || again != ep {
		t.Errorf("after restart the API server is at %s (%v), before at %s: the kubeconfig would name a dead port", again, err, ep)
	}

	ms, err := d.List(ctx, cluster)
	must(t, err)
	if len(ms) != 2 || ms[0].Name != cp.Name || ms[1].Name != w.Name {
		t.Errorf("List = %+v", ms)
	}

	// Delete leaves nothing of the cluster, and deleting again is fine.
	for _, s := range []drivers.MachineSpec{cp, w} {
		must(t, d.Delete(ctx, s.Ref))
		must(t, d.Delete(ctx, s.Ref))
	}
	must(t, d.DeleteNetwork(ctx, cluster))
	must(t, d.DeleteNetwork(ctx, cluster))
	assertNothingLeft(t, c, cluster)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("source went away") }

// assertNothingLeft checks what `docker ps -a --filter label=...`,
// `docker network ls` and `docker volume ls` would show.
func assertNothingLeft(t *testing.T, c *client.Client, cluster string) {
	t.Helper()
	ctx := context.Background()
	f := client.Filters{}.Add("label", LabelCluster+"="+cluster)
	ctrs, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	must(t, err)
	vols, err := c.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	must(t, err)
	nets, err := c.NetworkList(ctx, client.NetworkListOptions{})
	must(t, err)
	for _, n := range nets.Items {
		if n.Name == NetworkName(cluster) || n.Labels[LabelCluster] == cluster {
			t.Errorf("network %s left behind", n.Name)
		}
	}
	if len(ctrs.Items) != 0 || len(vols.Items) != 0 {
		t.Errorf("left behind: %d containers, %d volumes", len(ctrs.Items), len(vols.Items))
	}
	if _, err := exec.LookPath("docker"); err == nil {
		out, _ := exec.Command("docker", "ps", "-a", "-q", "--filter", "label="+LabelCluster+"="+cluster).CombinedOutput()
		if strings.TrimSpace(string(out)) != "" {
			t.Errorf("docker ps -a shows containers of %s: %s", cluster, out)
		}
	}
}

func TestDeleteHalfCreated(t *testing.T) {
	d, c := requireDocker(t)
	ctx := context.Background()
	img := busyboxImage(t, c)
	cluster, subnet := testCluster(t, d, c)
	must(t, d.EnsureNetwork(ctx, drivers.Network{Cluster: cluster, Subnet: subnet}))
	ip := subnet.Addr().Next().Next()

	// A create that got as far as the volume, and one that made its
	// container but never started it.
	s1 := spec(cluster, cluster+"-a", config.Worker, img, ip)
	_, err := c.VolumeCreate(ctx, client.VolumeCreateOptions{Name: volumeName(s1.Name), Labels: d.labels(s1)})
	must(t, err)
	s2 := spec(cluster, cluster+"-b", config.Worker, img, ip.Next())
	s2.Start = false
	must(t, d.Create(ctx, s2))
	if m, _ := d.Inspect(ctx, s2.Ref); m.State != drivers.StateStopped {
		t.Errorf("created without start: %s", m.State)
	}
	for _, s := range []drivers.MachineSpec{s1, s2} {
		must(t, d.Delete(ctx, s.Ref))
	}
	must(t, d.DeleteNetwork(ctx, cluster))
	assertNothingLeft(t, c, cluster)
}

func TestClearErrors(t *testing.T) {
	d, c := requireDocker(t)
	ctx := context.Background()
	img := busyboxImage(t, c)
	cluster, subnet := testCluster(t, d, c)

	t.Run("image missing", func(t *testing.T) {
		must(t, d.EnsureNetwork(ctx, drivers.Network{Cluster: cluster, Subnet: subnet}))
		err := d.Create(ctx, spec(cluster, cluster+"-x", config.Worker, "hwk-test/no-such-image:0", subnet.Addr().Next().Next()))
		var me *drivers.ImageMissingError
		if !errors.As(err, &me) || !strings.Contains(err.Error(), BuildCommand) {
			t.Fatalf("err = %v, want ImageMissingError naming %q", err, BuildCommand)
		}
		assertNoContainers(t, c, cluster)
	})

	t.Run("subnet used by another network", func(t *testing.T) {
		cluster2, subnet2 := testCluster(t, d, c)
		other := "hwk-test-other-" + cluster2
		_, err := c.NetworkCreate(ctx, other, client.NetworkCreateOptions{Driver: "bridge",
			IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: netip.PrefixFrom(subnet2.Addr(), 25)}}}})
		must(t, err)
		defer c.NetworkRemove(ctx, other, client.NetworkRemoveOptions{})
		// CheckSubnet sees it before anything is made, EnsureNetwork
		// refuses it; neither advises removing a network hwk did not make.
		for _, check := range []func(context.Context, drivers.Network) error{d.CheckSubnet, d.EnsureNetwork} {
			err = check(ctx, drivers.Network{Cluster: cluster2, Subnet: subnet2})
			var se *drivers.SubnetInUseError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), `docker network "`+other+`"`) || strings.Contains(err.Error(), "rm") {
				t.Fatalf("err = %v, want SubnetInUseError naming %s and no advice to remove it", err, other)
			}
		}
		// Another cluster's network is named as that cluster's.
		must(t, d.CheckSubnet(ctx, drivers.Network{Cluster: cluster, Subnet: subnet}))
		err = d.CheckSubnet(ctx, drivers.Network{Cluster: cluster2, Subnet: subnet})
		if err == nil || !strings.Contains(err.Error(), "of hwk cluster "+cluster) || strings.Contains(err.Error(), "rm") {
			t.Fatalf("a subnet of cluster %s, checked for %s: %v", cluster, cluster2, err)
		}
	})

	t.Run("name used by a container that is not ours", func(t *testing.T) {
		name := cluster + "-taken"
		res, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Image: img})
		must(t, err)
		defer c.ContainerRemove(ctx, res.ID, client.ContainerRemoveOptions{Force: true})
		err = d.Create(ctx, spec(cluster, name, config.Worker, img, subnet.Addr().Next().Next()))
		var ne *drivers.NameInUseError
		if !errors.As(err, &ne) || !strings.Contains(err.Error(), name) {
			t.Fatalf("err = %v, want NameInUseError", err)
		}
		// Delete of our node by that name must not touch their container.
		must(t, d.Delete(ctx, drivers.Ref{Cluster: cluster, Name: name}))
		if _, err := c.ContainerInspect(ctx, res.ID, client.ContainerInspectOptions{}); err != nil {
			t.Errorf("their container is gone: %v", err)
		}
	})

	t.Run("windows node", func(t *testing.T) {
		s := spec(cluster, cluster+"-win", config.Worker, img, subnet.Addr().Next().Next())
		s.OS = config.Windows
		if err := d.Create(ctx, s); err == nil || !strings.Contains(err.Error(), "Linux nodes only") {
			t.Fatalf("err = %v", err)
		}
	})
}

func assertNoContainers(t *testing.T, c *client.Client, cluster string) {
	t.Helper()
	ctrs, err := c.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", LabelCluster+"="+cluster)})
	must(t, err)
	if len(ctrs.Items) != 0 {
		t.Errorf("%d containers made", len(ctrs.Items))
	}
}

// TestDeleteNetworkRemovesProbes checks that the privilege probe an up
// killed at the wrong moment leaves behind goes with its cluster's network,
// and only that cluster's.
func TestDeleteNetworkRemovesProbes(t *testing.T) {
	d, c := requireDocker(t)
	ctx := context.Background()
	img := busyboxImage(t, c)
	cluster, _ := testCluster(t, d, c)
	other := cluster + "-other"
	ids := map[string]string{}
	for _, cl := range []string{cluster, other} {
		res, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: img, Labels: map[string]string{LabelProbeFor: cl}}})
		must(t, err)
		ids[cl] = res.ID
		t.Cleanup(func() { c.ContainerRemove(ctx, res.ID, client.ContainerRemoveOptions{Force: true}) })
	}
	must(t, d.DeleteNetwork(ctx, cluster))
	if _, err := c.ContainerInspect(ctx, ids[cluster], client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("the probe of %s is still there (%v)", cluster, err)
	}
	if _, err := c.ContainerInspect(ctx, ids[other], client.ContainerInspectOptions{}); err != nil {
		t.Errorf("another cluster's probe went too: %v", err)
	}
}
