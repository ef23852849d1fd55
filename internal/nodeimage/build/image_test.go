package build_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/internal/debian"
	"github.com/hwk-dev/hwk/internal/drivers/docker"
	"github.com/hwk-dev/hwk/internal/format/diskimage"
	"github.com/hwk-dev/hwk/internal/nodeimage/build"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// buildImage builds the real node image from source for the tests in this
// file, which boot it; it skips unless HWK_NODE_IMAGE_TEST=1 (make
// node-image-test, which CI runs), as root with a Docker engine, QEMU and
// the Go module proxy.
func buildImage(t *testing.T) *nodeimage.Manifest {
	t.Helper()
	// About half an hour cold on two cores, seconds when cached.
	if os.Getenv("HWK_NODE_IMAGE_TEST") != "1" {
		t.Skip("builds and boots the real node image; set HWK_NODE_IMAGE_TEST=1 (make node-image-test)")
	}
	var steps []string
	m, err := build.Build(context.Background(), nodeimage.Options{
		KubernetesVersion: config.DefaultKubernetesVersion,
		Source:            nodeimage.FromSource,
		Formats:           nodeimage.Formats,
		CacheDir:          state.DefaultDirs().Cache,
		Step: func(name string, fn func() error) error {
			steps = append(steps, name)
			start := time.Now()
			err := fn()
			t.Logf("%s: %s", name, time.Since(start).Round(100*time.Millisecond))
			return err
		},
		Log:    testWriter{t},
		Docker: func() (client.APIClient, error) { return client.New(client.FromEnv) },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range m.Stages {
		t.Logf("stage %s: %.1fs", st.Name, st.Seconds)
	}
	for _, f := range nodeimage.Formats {
		t.Logf("%s: %d bytes", f, m.Artifacts[f].Size)
	}
	return m
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	if os.Getenv("HWK_TEST_VERBOSE") == "1" {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// TestSecondBuildIsCached checks that a second build finds every format in
// the cache and runs no stage.
func TestSecondBuildIsCached(t *testing.T) {
	first := buildImage(t)
	start := time.Now()
	var steps []string
	m, err := build.Build(context.Background(), nodeimage.Options{
		KubernetesVersion: first.KubernetesVersion, Source: first.Source, Formats: nodeimage.Formats,
		CacheDir: state.DefaultDirs().Cache,
		Step:     func(name string, fn func() error) error { steps = append(steps, name); return fn() },
		Docker:   func() (client.APIClient, error) { return client.New(client.FromEnv) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Key != first.Key || len(steps) != 1 || !strings.HasPrefix(steps[0], "Cached node image") {
		t.Fatalf("second build ran %v (key %s vs %s); want only the cache lookup", steps, m.Key, first.Key)
	}
	t.Logf("second build with unchanged inputs: %s", time.Since(start).Round(time.Millisecond))
}

// TestDockerFormatBoots starts the docker-format image in the docker
// driver and checks the node is what kubeadm needs: containerd up with
// every image kubeadm will ask for already in its k8s.io namespace.
func TestDockerFormatBoots(t *testing.T) {
	m := buildImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d := docker.New()
	if _, err := d.Preflight(ctx); err != nil {
		t.Fatal(err)
	}
	cluster := fmt.Sprintf("ni%d", time.Now().UnixNano()%1e6)
	ref := drivers.Ref{Cluster: cluster, Name: cluster + "-node"}
	t.Cleanup(func() {
		_ = d.Delete(context.Background(), ref)
		_ = d.DeleteNetwork(context.Background(), cluster)
	})
	ensureNetwork(ctx, t, d, cluster)
	// The seed a node container gets: hwk-seed applies it at boot.
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHdrIHRlc3Qga2V5IGZvciB0aGUgc2VlZCB0ZXN0IQ hwk-test"
	seed := drivers.Seed{Files: []drivers.File{
		{Path: "/var/lib/hwk/seed/hostname", Mode: 0o644, Content: []byte("seeded-node\n")},
		{Path: "/var/lib/hwk/seed/authorized_keys", Mode: 0o600, Content: []byte(key + "\n")},
	}}
	if err := d.Create(ctx, drivers.MachineSpec{Ref: ref, Role: config.ControlPlane, OS: config.Linux,
		Image: m.Artifacts[nodeimage.FormatDocker].DockerImage, CPUs: 2, MemoryBytes: 2 << 30, Seed: seed, Start: true}); err != nil {
		t.Fatal(err)
	}
	n, err := d.Node(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	var state string
	for start := time.Now(); time.Since(start) < 2*time.Minute; time.Sleep(time.Second) {
		state, _ = n.Output(ctx, "systemctl", "is-active", "containerd")
		if strings.TrimSpace(state) == "active" {
			break
		}
	}
	if strings.TrimSpace(state) != "active" {
		out, _ := n.Output(ctx, "journalctl", "-u", "containerd", "--no-pager", "-n", "30")
		t.Fatalf("containerd is %q after 2 minutes:\n%s", state, out)
	}
	if out, _ := n.Output(ctx, "systemctl", "is-active", "hwk-seed"); strings.TrimSpace(out) != "active" {
		log, _ := n.Output(ctx, "journalctl", "-u", "hwk-seed", "--no-pager")
		t.Errorf("hwk-seed is %q:\n%s", strings.TrimSpace(out), log)
	}
	if out, _ := n.Output(ctx, "hostname"); strings.TrimSpace(out) != "seeded-node" {
		t.Errorf("hostname %q, want the seed's seeded-node", strings.TrimSpace(out))
	}
	if out, _ := n.Output(ctx, "cat", "/root/.ssh/authorized_keys"); strings.TrimSpace(out) != key {
		t.Errorf("authorized_keys %q, want the seed's key", out)
	}
	// One host key, the Ed25519 one sshd is told to use (an RSA key would
	// cost most of a second of boot), and sshd serving with it.
	if out, _ := n.Output(ctx, "sh", "-c", "ls /etc/ssh/ssh_host_*_key"); strings.TrimSpace(out) != "/etc/ssh/ssh_host_ed25519_key" {
		t.Errorf("host keys made at first boot: %q, want only /etc/ssh/ssh_host_ed25519_key", out)
	}
	if out, _ := n.Output(ctx, "systemctl", "is-active", "ssh"); strings.TrimSpace(out) != "active" {
		log, _ := n.Output(ctx, "journalctl", "-u", "ssh", "--no-pager")
		t.Errorf("ssh is %q:\n%s", strings.TrimSpace(out), log)
	}
	// Calico's CNI plugins are in place (fromImages), so its install-cni
	// copies nothing: calico-ipam is calico under its other name (a hard
	// link in hwk's image, a symbolic one in upstream's), and the root
	// records where they came from, which up checks.
	if out, err := n.Output(ctx, "stat", "-L", "-c", "%i %a", "/opt/cni/bin/calico", "/opt/cni/bin/calico-ipam"); err != nil {
		t.Errorf("the node has no Calico CNI plugins: %v %s", err, out)
	} else if f := strings.Fields(out); len(f) != 4 || f[0] != f[2] || f[1] != "755" || f[3] != "755" {
		t.Errorf("stat of calico and calico-ipam: %q, want one inode, mode 755", out)
	}
	if !bootstrap.NodeHasCalicoPlugins(ctx, n) {
		out, _ := n.Output(ctx, "cat", "/"+images.RootFilesRecord)
		t.Errorf("the node's record of its image files does not name %s's plugin: %q", bootstrap.CalicoCNIImage, out)
	}
	listed, err := n.Output(ctx, "ctr", "-n", "k8s.io", "images", "ls", "-q")
	if err != nil {
		t.Fatal(err)
	}
	have := strings.Fields(listed)
	for _, im := range m.Images {
		if !slices.Contains(have, im.Ref) {
			t.Errorf("ctr -n k8s.io images ls has no %s; it lists %v", im.Ref, have)
		}
	}
	wanted, err := n.Output(ctx, "kubeadm", "config", "images", "list", "--kubernetes-version", m.KubernetesVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range strings.Fields(wanted) {
		if !slices.Contains(have, ref) {
			t.Errorf("kubeadm wants %s, which is not preloaded", ref)
		}
	}
	// The CRI view (what the kubelet sees) lists them too.
	cri, err := n.Output(ctx, "crictl", "images", "-q")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(strings.Fields(cri)); got < len(m.Images) {
		t.Errorf("crictl lists %d images, want %d", got, len(m.Images))
	}
	for _, args := range [][]string{{"runc", "--version"}, {"kubelet", "--version"}, {"containerd", "--version"}} {
		out, err := n.Output(ctx, args...)
		if err != nil {
			t.Errorf("%v: %v", args, err)
		}
		t.Logf("%s", strings.TrimSpace(out))
	}
	t.Logf("preloaded in the node: %d images; kubeadm wants: %s", len(have), strings.Join(strings.Fields(wanted), " "))
}

// TestDiskFormats checks qemu-img reads every disk format and that the
// qcow2 boots under QEMU (TCG; slow, hence the generous timeout) until
// systemd reaches multi-user.
func TestDiskFormats(t *testing.T) {
	m := buildImage(t)
	ctx := context.Background()
	for _, f := range []nodeimage.Format{nodeimage.FormatQCOW2, nodeimage.FormatVHDX, nodeimage.FormatVDI} {
		a := m.Artifacts[f]
		format, size, err := diskimage.Info(ctx, filepath.Join(m.Dir, a.Path))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if format != string(f) || size != nodeimage.DefaultDiskSize {
			t.Errorf("%s: qemu-img says format %s, virtual size %d", f, format, size)
		}
	}
	// A cidata seed disk, as VM drivers will attach one: FAT labelled
	// CIDATA, made with mtools (no mounts).
	seedDir := t.TempDir()
	seed := filepath.Join(seedDir, "cidata.img")
	files := map[string]string{
		"hostname":        "hwk-vm-test\n",
		"network":         "ADDRESS=172.31.250.10/24\nGATEWAY=172.31.250.1\nDNS=172.31.250.1\n",
		"authorized_keys": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHdrIHRlc3Qga2V5IGZvciB0aGUgc2VlZCB0ZXN0IQ hwk-test\n",
	}
	if out, err := exec.Command("mkfs.fat", "-C", "-n", "CIDATA", seed, "2048").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.fat: %v\n%s", err, out)
	}
	for name, content := range files {
		p := filepath.Join(seedDir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mcopy", "-i", seed, p, "::"+name).CombinedOutput(); err != nil {
			t.Fatalf("mcopy: %v\n%s", err, out)
		}
	}
	var console strings.Builder
	start := time.Now()
	err := diskimage.BootCheck(ctx, filepath.Join(m.Dir, m.Artifacts[nodeimage.FormatQCOW2].Path), 15*time.Minute,
		"Reached target multi-user.target", &console, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("qcow2 reached multi-user.target under TCG in %s", time.Since(start).Round(time.Second))
	// hwk-seed found the seed disk and applied it before the network came up.
	for _, want := range []string{"hwk-seed: seed found at /run/hwk-seed", "hwk-seed: hostname hwk-vm-test",
		"hwk-seed: address 172.31.250.10/24 gateway 172.31.250.1", "hwk-seed: authorized_keys installed"} {
		if !strings.Contains(console.String(), want) {
			t.Errorf("the console never shows %q", want)
		}
	}
	if t.Failed() {
		t.Logf("console:\n%s", console.String())
	}
}

// ensureNetwork makes the test cluster's network on a /24 nothing else
// on this host uses.
func ensureNetwork(ctx context.Context, t *testing.T, d *docker.Driver, cluster string) {
	t.Helper()
	for i := range 50 {
		subnet := netip.MustParsePrefix(fmt.Sprintf("172.30.%d.0/24", 100+(time.Now().Nanosecond()/1000+i)%150))
		err := d.EnsureNetwork(ctx, drivers.Network{Cluster: cluster, Subnet: subnet})
		var inUse *drivers.SubnetInUseError
		if errors.As(err, &inUse) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("no free /24 in 172.30.100.0-249.0 for the test network")
}

// TestRootIsTheLock checks that the built root holds exactly the packages
// of the committed Debian lock, each at its locked version and configured
// ("install ok installed"), so any two builds from one lock have the same
// package set.
func TestRootIsTheLock(t *testing.T) {
	m := buildImage(t)
	lf, err := os.Open(filepath.Join("..", "..", "node-images", "linux", "debian.lock.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lock, err := debian.ReadLock(lf)
	lf.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(m.Dir, m.Artifacts[nodeimage.FormatTar].Path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	status := readFromTar(t, zr, "var/lib/dpkg/status")
	installed := map[string]string{}
	for _, para := range strings.Split(status, "\n\n") {
		var name, version, state string
		for _, line := range strings.Split(para, "\n") {
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "Package":
				name = v
			case "Version":
				version = v
			case "Status":
				state = v
			}
		}
		if name == "" {
			continue
		}
		if state != "install ok installed" {
			t.Errorf("%s is %q", name, state)
		}
		installed[name] = version
	}
	for _, p := range lock.Packages {
		if v, ok := installed[p.Name]; !ok {
			t.Errorf("locked %s %s is not in the root", p.Name, p.Version)
		} else if v != p.Version {
			t.Errorf("%s is %s in the root, %s in the lock", p.Name, v, p.Version)
		}
		delete(installed, p.Name)
	}
	for n, v := range installed {
		t.Errorf("%s %s is in the root but not in the lock", n, v)
	}
	t.Logf("the root has the lock's %d packages (InRelease of %s), each configured", len(lock.Packages), lock.InRelease.Date)
}

// readFromTar returns the contents of the tar's file name (with or
// without a leading "./").
func readFromTar(t *testing.T, r io.Reader, name string) string {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no %s in the tar: %v", name, err)
		}
		if strings.TrimPrefix(h.Name, "./") == name {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(data)
		}
	}
}
