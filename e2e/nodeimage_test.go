//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/nodeimage/imagedist"
	"github.com/hwk-dev/hwk/internal/testing/registrytest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// hwkWith runs hwk with extra environment (HWK_HOME "" means the default
// cache, where make e2e built the node image) and returns stdout, stderr
// and how long it took.
func (e *env) hwkWith(extra []string, args ...string) (string, string, time.Duration, error) {
	e.t.Helper()
	c := exec.Command(e.bin, args...)
	c.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	c.Env = append(c.Env, extra...)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	start := time.Now()
	err := c.Run()
	took := time.Since(start)
	e.t.Logf("hwk %s (exit %v, %s)\n%s%s", strings.Join(args, " "), err, took.Round(time.Millisecond), errOut.String(), out.String())
	return out.String(), errOut.String(), took, err
}

// listRow is `hwk node-image list`'s row for the image called name.
func (e *env) listRow(extra []string, name string) string {
	e.t.Helper()
	out, _, _, err := e.hwkWith(extra, "node-image", "list")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return strings.Join(strings.Fields(l), " ")
		}
	}
	e.t.Fatalf("node-image list has no %s:\n%s", name, out)
	return ""
}

func engineImageID(t *testing.T, ref string) string {
	out, err := exec.Command("docker", "image", "inspect", "-f", "{{.Id}}", ref).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func rmiNode(t *testing.T, ref string) {
	t.Helper()
	if engineImageID(t, ref) != "" {
		docker(t, nil, "rmi", ref)
	}
}

// TestNodeImageDistribution: the node image make e2e built goes to a real
// registry (TLS, basic auth) and comes back every way a user gets it:
// `docker pull` of the index, `hwk node-image pull` of each format alone
// (timed), `save` and `load` with no network and then a cluster from
// it, `hwk up` with an empty cache pulling the digest this hwk pins from
// images.registry, and, with the registry gone, an up that fails while
// checking the host, names the three ways forward and leaves nothing.
func TestNodeImageDistribution(t *testing.T) {
	e := newEnv(t)
	version := config.DefaultKubernetesVersion
	engineRef := "hwk/node:" + version
	if engineImageID(t, engineRef) == "" {
		t.Fatalf("no %s in the engine: make e2e builds it first", engineRef)
	}
	r := registrytest.Start(t, registrytest.Options{TLS: true, Auth: true})
	auth := []string{"SSL_CERT_FILE=" + r.CAFile, "DOCKER_CONFIG=" + r.DockerConfig(t, r.User, r.Password)}
	home := func(dir string) []string { return append([]string{"HWK_HOME=" + dir}, auth...) }
	defaultCache := append([]string{"HWK_HOME="}, auth...)

	ref := r.Addr + "/hwk/node:" + version
	stdout, _, took, err := e.hwkWith(defaultCache, "node-image", "push", ref, "--image", version)
	if err != nil {
		t.Fatal(err)
	}
	pushed := strings.TrimSpace(stdout)
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(ref) + `@sha256:[0-9a-f]{64}$`).MatchString(pushed) {
		t.Fatalf("push printed %q", pushed)
	}
	digest := pushed[strings.Index(pushed, "@")+1:]
	t.Logf("FIGURE push of every format: %s", took.Round(100*time.Millisecond))

	// The source image, as the default cache lists it.
	var cached []struct {
		Name      string                     `json:"name"`
		Artifacts map[string]json.RawMessage `json:"artifacts"`
	}
	out, _, _, err := e.hwkWith(defaultCache, "node-image", "list", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &cached) != nil {
		t.Fatalf("node-image list: %v", err)
	}
	name, formats := "", []string{}
	for _, m := range cached {
		if strings.HasPrefix(m.Name, "linux-"+version+"-") {
			name = m.Name
			for _, f := range []string{"docker", "tar", "qcow2", "vhdx", "vdi"} {
				if _, ok := m.Artifacts[f]; ok {
					formats = append(formats, f)
				}
			}
			break
		}
	}
	sourceRow := e.listRow(defaultCache, name)

	// An archive of every format, made before the engine loses anything,
	// so the engine can always get its image back.
	archive := filepath.Join(t.TempDir(), "node.tar")
	if _, _, took, err := e.hwkWith(defaultCache, "node-image", "save", "-o", archive, version); err != nil {
		t.Fatal(err)
	} else {
		st, _ := os.Stat(archive)
		t.Logf("FIGURE save of every format: %s, archive %d MiB", took.Round(100*time.Millisecond), st.Size()>>20)
	}
	t.Cleanup(func() {
		if engineImageID(t, engineRef) == "" {
			e.hwkWith(home(t.TempDir()), "node-image", "load", "-i", archive, "--formats", "docker")
		}
	})
	sourceID := engineImageID(t, engineRef)

	// docker pull of the same reference: the docker format is an ordinary
	// image, and the same one.
	r.TrustInDocker(t)
	rmiNode(t, engineRef) // nothing of the image in the engine, as for hwk's own pull below
	start := time.Now()
	if out, err := exec.Command("docker", "--config", r.DockerConfig(t, r.User, r.Password), "pull", ref).CombinedOutput(); err != nil {
		t.Fatalf("docker pull %s: %v\n%s", ref, err, out)
	}
	t.Logf("FIGURE docker pull of the same reference (the docker format only), beside hwk's below: %s", time.Since(start).Round(100*time.Millisecond))
	docker(t, nil, "tag", ref, engineRef)
	if id := engineImageID(t, ref); id != sourceID {
		t.Errorf("docker pull %s gave %s, want %s", ref, id, sourceID)
	}
	docker(t, nil, "rmi", ref)

	// Each format alone into an empty cache, timed.
	for _, f := range formats {
		if f == "docker" {
			rmiNode(t, engineRef)
		}
		h := t.TempDir()
		_, _, took, err := e.hwkWith(home(h), "node-image", "pull", ref, "--formats", f)
		if err != nil {
			t.Fatalf("pull --formats %s: %v", f, err)
		}
		t.Logf("FIGURE pull of %s alone from the local registry: %s", f, took.Round(100*time.Millisecond))
		// Each format is up to a GiB; with the archive, the registry's
		// copy and the loaded cache below, keeping them all would need
		// some 14 GB of disk at once (a CI machine ran out).
		removeAll(t, h)
	}
	if engineImageID(t, engineRef) != sourceID {
		t.Fatalf("the docker format pulled back is not the image pushed")
	}

	// save → load with the network off → the same list row → a cluster.
	rmiNode(t, engineRef)
	loaded := t.TempDir()
	load := exec.Command("unshare", "--net", e.bin, "node-image", "load", "-i", archive, "--formats", strings.Join(formats, ","))
	load.Env = append(os.Environ(), "HWK_HOME="+loaded)
	start = time.Now()
	if out, err := load.CombinedOutput(); err != nil {
		t.Fatalf("load with no network: %v\n%s", err, out)
	} else {
		t.Logf("hwk node-image load (no network, %s):\n%s", time.Since(start).Round(100*time.Millisecond), out)
	}
	if row := e.listRow(home(loaded), name); row != sourceRow {
		t.Errorf("loaded image's row:\n  %s\nwant the source's:\n  %s", row, sourceRow)
	}
	// A failed check must not leave a cluster running (it would slow
	// every later test and keep its disk): down on the way out too.
	downOnExit(t, e, home(loaded), "e2e-load")
	if _, _, _, err := e.hwkWith(home(loaded), "up", "--name", "e2e-load", "--driver", "docker", "--windows-workers", "0"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := e.hwkWith(home(loaded), "down", "--name", "e2e-load"); err != nil {
		t.Fatal(err)
	}
	e.home = loaded
	e.assertGone("e2e-load")
	removeAll(t, loaded)

	// A hwk whose pins name the pushed digest, with images.registry at the
	// test registry: up with an empty cache pulls exactly that.
	pinned := buildPinned(t, version, digest)
	cfg := filepath.Join(t.TempDir(), "cluster.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("apiVersion: %s\nkind: Cluster\nimages:\n  registry: %s/hwk\n", config.APIVersion, r.Addr)), 0o644)
	rmiNode(t, engineRef)
	pe := *e
	pe.bin = pinned
	pe.home = t.TempDir()
	downOnExit(t, &pe, home(pe.home), "e2e-pin")
	_, stderr, took, err := pe.hwkWith(home(pe.home), "up", "--name", "e2e-pin", "--config", cfg, "--driver", "docker", "--windows-workers", "0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "Pulling node image "+ref+"@"+digest+" (docker)") {
		t.Errorf("up did not say it pulled the pinned digest:\n%s", stderr)
	}
	t.Logf("FIGURE up with an empty cache, pulling the docker format: %s", took.Round(100*time.Millisecond))
	if _, _, _, err := pe.hwkWith(home(pe.home), "down", "--name", "e2e-pin"); err != nil {
		t.Fatal(err)
	}
	pe.assertGone("e2e-pin")

	// The registry gone: up fails in "Checking the host", says the three
	// ways, and makes nothing.
	r.Stop()
	rmiNode(t, engineRef)
	pe.home = t.TempDir()
	downOnExit(t, &pe, home(pe.home), "e2e-noreg")
	_, stderr, _, err = pe.hwkWith(home(pe.home), "up", "--name", "e2e-noreg", "--config", cfg, "--driver", "docker", "--windows-workers", "0")
	if err == nil {
		t.Fatal("up with the registry stopped succeeded")
	}
	for _, want := range []string{"✗ Checking the host", "cannot be reached", "hwk node-image load -i FILE",
		"hwk node-image build linux --formats docker", "hwk up --image REGISTRY/REPO:TAG"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the failed up does not say %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "Creating the node network") {
		t.Error("up went past the host checks")
	}
	pe.assertGone("e2e-noreg")
	if entries, _ := os.ReadDir(filepath.Join(pe.home, "cache", "node-images")); len(entries) > 0 {
		t.Errorf("the failed up left node images %v", entries)
	}
}

// downOnExit downs the cluster when the test ends, also when it fails
// between its up and its own down (a second down finds nothing to do).
func downOnExit(t *testing.T, e *env, extra []string, name string) {
	t.Cleanup(func() { e.hwkWith(extra, "down", "--name", name) })
}

// removeAll frees what a step of the test no longer needs.
func removeAll(t *testing.T, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Errorf("remove %s: %v", dir, err)
	}
}

// buildPinned builds a hwk whose pins (node-images/published.yaml) name
// digest for version, the way the publishing workflow's change would,
// without touching the tree: go build -overlay swaps the embedded file.
func buildPinned(t *testing.T, version, digest string) string {
	t.Helper()
	src, err := filepath.Abs("../node-images/published.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	pins, err := imagedist.SetPin(data, version, digest)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pinFile := filepath.Join(dir, "published.yaml")
	overlay := filepath.Join(dir, "overlay.json")
	os.WriteFile(pinFile, pins, 0o644)
	o, _ := json.Marshal(map[string]map[string]string{"Replace": {src: pinFile}})
	os.WriteFile(overlay, o, 0o644)
	bin := filepath.Join(dir, "hwk")
	cmd := exec.Command("go", "build", "-overlay", overlay, "-o", bin, "../cmd/hwk")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build with the pinned digest: %v\n%s", err, out)
	}
	return bin
}
