//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/internal/testing/imagearchivetest"
)

// testLoadImage loads a locally built image into both nodes, runs it
// with imagePullPolicy Never, loads it again (already present, in under a
// second), loads a rebuilt image whose top layer alone changed (that layer
// alone is sent), and checks that a corrupt archive and an image no node
// runs load nothing while a multi-platform one loads only the nodes'
// platform.
func testLoadImage(t *testing.T, e *env, cs kubernetes.Interface, cluster, cp, worker string) {
	buildProbe(t, probeImage)
	stdout, _, err := e.hwk("load-image", probeImage, "--name", cluster)
	if err != nil {
		t.Fatalf("load-image: %v", err)
	}
	for _, n := range []string{cp, worker} {
		if !regexp.MustCompile(`loaded to ` + n + ` in \S+ \(`).MatchString(stdout) {
			t.Errorf("load-image does not say it loaded %s:\n%s", n, stdout)
		}
	}

	pod := probePod("loaded", worker, "serve")
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, cs, "loaded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && bootstrap.PodReady(p) })
	t.Logf("pod %s with imagePullPolicy Never runs %s on %s", got.Name, probeImage, got.Spec.NodeName)
	_ = cs.CoreV1().Pods("default").Delete(ctx, "loaded", metav1.DeleteOptions{})

	start := time.Now()
	stdout, _, err = e.hwk("load-image", probeImage, "--name", cluster)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("second load-image: %v", err)
	}
	// A figure, not a limit: the skip path is asserted by its message below,
	// and a timed assertion would fail on a busy machine.
	fmt.Printf("E2E LOAD-IMAGE AGAIN: %s\n", took.Round(time.Millisecond))
	if want := "already present on " + cp + ", " + worker; !strings.Contains(stdout, want) {
		t.Errorf("second load-image does not say %q:\n%s", want, stdout)
	}

	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	held := func(ref string) []string {
		var on []string
		for _, n := range []string{cp, worker} {
			if strings.Contains(docker(t, nil, "exec", n, "ctr", "-n", "k8s.io", "images", "ls", "-q"), ref) {
				on = append(on, n)
			}
		}
		return on
	}

	t.Run("rebuilt image", func(t *testing.T) { testLoadRebuilt(t, e, cs, cluster, cp, worker) })

	t.Run("corrupt archive", func(t *testing.T) {
		const ref = "hwk.dev/e2e-probe:corrupt"
		docker(t, nil, "tag", probeImage, ref)
		defer docker(t, nil, "rmi", ref)
		save := filepath.Join(dir, "probe.tar")
		docker(t, nil, "save", "-o", save, ref)
		data, err := os.ReadFile(save)
		if err != nil {
			t.Fatal(err)
		}
		// Flip a byte inside the probe binary's layer: the tar still
		// reads, the digest does not hold.
		i := bytes.Index(data, []byte("hello from"))
		if i < 0 {
			t.Fatal("probe binary not found in the archive")
		}
		data[i] ^= 0xff
		_, stderr, err := e.hwk("load-image", "--archive", write("corrupt.tar", data), "--name", cluster)
		if err == nil || !strings.Contains(stderr, "archive is corrupt") || !strings.Contains(stderr, "nothing was loaded") {
			t.Errorf("corrupt archive: err %v, stderr:\n%s", err, stderr)
		}
		if on := held(ref); len(on) > 0 {
			t.Errorf("%s is on %v after a failed load", ref, on)
		}
	})

	t.Run("no node runs it", func(t *testing.T) {
		const ref = "hwk.dev/e2e-windows-only:ltsc2022"
		archive := write("windows.tar", imagearchivetest.OCI(
			imagearchivetest.Image{Refs: []string{"hwk.dev/e2e-linux:ok"}, Platforms: []string{"linux/amd64"}},
			imagearchivetest.Image{Refs: []string{ref}, Platforms: []string{"windows/amd64:10.0.20348.2849"}},
		))
		_, stderr, err := e.hwk("load-image", "--archive", archive, "--name", cluster)
		if err == nil || !strings.Contains(stderr, "image "+ref+" (windows/amd64 ltsc2022 (10.0.20348.2849)) fits none of the nodes") {
			t.Errorf("windows-only image: err %v, stderr:\n%s", err, stderr)
		}
		if on := held("hwk.dev/e2e-linux:ok"); len(on) > 0 {
			t.Errorf("the Linux image of a refused archive is on %v", on)
		}
	})

	t.Run("multi-platform", func(t *testing.T) {
		const ref = "hwk.dev/e2e-multi:1"
		archive := write("multi.tar", imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{ref},
			Platforms: []string{"linux/amd64", "linux/arm64", "windows/amd64:10.0.20348.2849"}, LayerBytes: 1 << 20}))
		if _, _, err := e.hwk("load-image", "--archive", archive, "--name", cluster); err != nil {
			t.Fatalf("multi-platform archive: %v", err)
		}
		for _, n := range []string{cp, worker} {
			ls := docker(t, nil, "exec", n, "ctr", "-n", "k8s.io", "images", "ls", "name=="+ref)
			if !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(ref)+`\s.*\slinux/amd64\s`).MatchString(ls) || strings.Contains(ls, "arm64") || strings.Contains(ls, "windows") {
				t.Errorf("%s holds other platforms than linux/amd64 of %s:\n%s", n, ref, ls)
			}
		}
	})
}

// testLoadRebuilt builds an image on the probe's (one layer of its own
// over the probe's), loads it, rebuilds it under the same name with that
// layer changed, and loads it again: each node gets the new top layer
// only, and a pod runs the new image.
func testLoadRebuilt(t *testing.T, e *env, cs kubernetes.Interface, cluster, cp, worker string) {
	const ref = "hwk.dev/e2e-rebuilt:dev"
	build := func(stamp string) string {
		dir := t.TempDir()
		files := map[string]string{"Dockerfile": "FROM " + probeImage + "\nCOPY stamp /stamp\n", "stamp": stamp}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		docker(t, nil, "build", "-q", "-t", ref, dir)
		return strings.TrimSpace(docker(t, nil, "image", "inspect", "--format", "{{.Id}}", ref))
	}
	defer docker(t, nil, "rmi", "-f", ref)
	build("first build")
	if _, _, err := e.hwk("load-image", ref, "--name", cluster); err != nil {
		t.Fatalf("first load: %v", err)
	}
	id := build("second build: only this layer changed")
	start := time.Now()
	stdout, _, err := e.hwk("load-image", ref, "--name", cluster)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("load of the rebuilt image: %v", err)
	}
	fmt.Printf("E2E LOAD-IMAGE REBUILT: %s\n%s", took.Round(time.Millisecond), stdout)
	for _, n := range []string{cp, worker} {
		if !regexp.MustCompile(`loaded to ` + n + ` in \S+ \([^)]*; 1 layer sent, 1 reused\)`).MatchString(stdout) {
			t.Errorf("the rebuilt image's load does not say 1 layer sent and 1 reused on %s:\n%s", n, stdout)
		}
	}
	pod := probePod("rebuilt", worker, "serve")
	pod.Spec.Containers[0].Image = ref
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cs.CoreV1().Pods("default").Delete(context.Background(), "rebuilt", metav1.DeleteOptions{})
	}()
	got := waitPod(t, cs, "rebuilt", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && bootstrap.PodReady(p) })
	want := criImageID(t, worker, ref, id)
	if st := got.Status.ContainerStatuses; len(st) != 1 || !strings.Contains(st[0].ImageID, strings.TrimPrefix(want, "sha256:")) {
		t.Errorf("the pod runs %+v, want the rebuilt image %s", st, want)
	}
}

// criImageID is the image ID the node's CRI gives ref, after checking that
// it is the engine's image id: in Docker's classic store the engine's ID
// is that same config digest; in its containerd store it is the index or
// manifest digest, which is then the target of the node's containerd image.
func criImageID(t *testing.T, node, ref, id string) string {
	t.Helper()
	cri := strings.TrimSpace(docker(t, nil, "exec", node, "crictl", "inspecti", "-o", "go-template", "--template", "{{.status.id}}", ref))
	if cri == id {
		return cri
	}
	ls := docker(t, nil, "exec", node, "ctr", "-n", "k8s.io", "images", "ls", "name=="+ref)
	if !strings.Contains(ls, id) {
		t.Errorf("%s holds %s as %s, and its containerd image's target is not the engine's %s:\n%s", node, ref, cri, id, ls)
	}
	return cri
}

// TestLoadFromContainerdStore loads a rebuilt image from Docker's
// containerd image store (the default of Docker Desktop's new installs
// and of Docker Engine 29): its save is an OCI layout whose blobs hwk
// filters as they stream, so each node gets only the new top layer, and
// a pod runs the result. `make e2e-store` starts such an engine
// (hack/dockerd-store.sh) and sets HWK_E2E_CONTAINERD_STORE=1; without
// it the test is skipped.
func TestLoadFromContainerdStore(t *testing.T) {
	if os.Getenv("HWK_E2E_CONTAINERD_STORE") == "" {
		t.Skip("needs Docker's containerd image store: run make e2e-store")
	}
	if st := docker(t, nil, "info", "-f", "{{.DriverStatus}}"); !strings.Contains(st, "io.containerd.snapshotter") {
		t.Fatalf("the engine does not use the containerd image store (driver status %s)", st)
	}
	e := newEnv(t)
	const name = "store"
	cp, worker := name+"-cp", name+"-linux-1"
	t.Cleanup(func() { e.hwk("down", "--name", name) })
	if _, _, err := e.hwk("up", "--name", name, "--windows-workers", "0", "--linux-workers", "1", "--driver", "docker"); err != nil {
		t.Fatalf("up: %v", err)
	}
	cs := client(t, e.kubeconfig, "hwk-"+name)
	buildProbe(t, probeImage)
	since := time.Now().Add(-time.Second).Unix()
	testLoadRebuilt(t, e, cs, name, cp, worker)
	// The first load (the nodes hold nothing of the image) reads a save;
	// the rebuilt one comes by a push to hwk's registry, which the
	// engine records as a push, between a tag and its removal.
	events := docker(t, nil, "events", "--since", fmt.Sprint(since), "--until", fmt.Sprint(time.Now().Unix()),
		"--filter", "type=image", "--format", "{{.Action}}")
	count := map[string]int{}
	for _, a := range strings.Fields(events) {
		count[a]++
	}
	t.Logf("image events during the loads: %v", count)
	if count["save"] != 1 || count["push"] != 1 {
		t.Errorf("image events %v, want one save (the first load) and one push (the rebuilt one)", count)
	}
	if repos := docker(t, nil, "image", "ls", "--format", "{{.Repository}}"); strings.Contains(repos, "hwk-load-") {
		t.Errorf("hwk's push left a tag in the engine:\n%s", repos)
	}
}
