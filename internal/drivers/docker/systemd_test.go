package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// systemdPackages is the smallest Debian rootfs that boots systemd and runs
// containers: a stand-in for the real node image, which has its own recipe.
var systemdPackages = []string{"systemd", "systemd-sysv", "dbus", "containerd", "runc"}

// systemdImage builds (once per engine) a Debian bookworm rootfs with
// debootstrap and imports it as an image.
func systemdImage(t *testing.T, c *client.Client) string {
	t.Helper()
	sum := sha256.Sum256([]byte("bookworm minbase " + strings.Join(systemdPackages, ",")))
	ref := "hwk-test/systemd:" + hex.EncodeToString(sum[:6])
	ctx := context.Background()
	if _, err := c.ImageInspect(ctx, ref); err == nil {
		return ref
	}
	if runtime.GOOS == "windows" {
		t.Skip("building the systemd test image takes debootstrap and tar, Linux tools; a Linux run of this test on the same engine leaves the image for this one")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil || os.Geteuid() != 0 {
		if os.Getenv("HWK_REQUIRE_DOCKER") == "1" {
			t.Fatalf("building the systemd test image needs root and debootstrap (Debian: debootstrap)")
		}
		t.Skip("building the systemd test image needs root and debootstrap")
	}
	root := filepath.Join(t.TempDir(), "rootfs")
	mirror := os.Getenv("HWK_DEBIAN_MIRROR")
	if mirror == "" {
		mirror = "http://deb.debian.org/debian"
	}
	start := time.Now()
	out, err := exec.Command("debootstrap", "--variant=minbase", "--include="+strings.Join(systemdPackages, ","),
		"bookworm", root, mirror).CombinedOutput()
	if err != nil {
		t.Fatalf("debootstrap: %v\n%s", err, lastN(string(out), 20))
	}
	t.Logf("debootstrap took %s", time.Since(start).Round(time.Second))
	tarc := exec.Command("tar", "-C", root, "-c", ".")
	pipe, err := tarc.StdoutPipe()
	must(t, err)
	must(t, tarc.Start())
	_, err = c.ImageImport(ctx, client.ImageImportSource{Source: pipe, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: []string{`CMD ["/sbin/init"]`}})
	must(t, err)
	must(t, tarc.Wait())
	return ref
}

func lastN(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func TestSystemdNodeRunsNestedContainer(t *testing.T) {
	d, c := requireDocker(t)
	ctx := context.Background()
	img := systemdImage(t, c)
	bb := busyboxImage(t, c)
	cluster, subnet := testCluster(t, d, c)
	must(t, d.EnsureNetwork(ctx, drivers.Network{Cluster: cluster, Subnet: subnet}))
	s := spec(cluster, cluster+"-cp", config.ControlPlane, img, subnet.Addr().Next().Next())
	s.MemoryBytes = 1 << 30
	must(t, d.Create(ctx, s))
	n, err := d.Node(ctx, s.Ref)
	must(t, err)

	// is-system-running prints "offline" until systemd is up as PID 1 and
	// "starting" until boot is done.
	start := time.Now()
	var state string
	for time.Since(start) < 3*time.Minute {
		out, _ := n.Output(ctx, "systemctl", "is-system-running")
		state = strings.TrimSpace(out)
		if state != "offline" && state != "initializing" && state != "starting" && state != "" {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("systemd reached %q in %s", state, time.Since(start).Round(100*time.Millisecond))
	switch state {
	case "running":
	case "degraded":
		failed, _ := n.Output(ctx, "systemctl", "--failed", "--no-legend", "--plain")
		t.Logf("degraded; failed units:\n%s", failed)
	default:
		logs, _ := exec.Command("docker", "logs", "--tail", "40", s.Name).CombinedOutput()
		t.Fatalf("systemd is %q, want running or degraded; console:\n%s", state, logs)
	}
	if out, err := n.Output(ctx, "systemctl", "is-active", "containerd"); err != nil || strings.TrimSpace(out) != "active" {
		t.Fatalf("containerd: %q %v", out, err)
	}

	// Load the busybox image into the node's containerd through the node
	// handle's stdin, then run it as a nested container.
	save, err := c.ImageSave(ctx, []string{bb})
	must(t, err)
	defer save.Close()
	must(t, n.Run(ctx, node.Cmd{Args: []string{"ctr", "-n", "hwk-test", "images", "import", "-"}, Stdin: save}))
	out, err := n.Output(ctx, "ctr", "-n", "hwk-test", "run", "--rm", "docker.io/"+bb, "nested", "sh", "-c", "echo nested-ok")
	if err != nil || strings.TrimSpace(out) != "nested-ok" {
		t.Fatalf("nested container: %q %v", out, err)
	}
}
