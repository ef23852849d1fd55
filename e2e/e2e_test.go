//go:build e2e

// Package e2e runs hwk as a user does, against a real Docker engine and
// real Kubernetes (the Linux node image, built from source): up, workloads,
// Windows routing on a registered Windows Node, down, and interrupted ups.
// Run with `make e2e`, which builds hwk and the node image first.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// env is one test's hwk: the binary, a private HWK_HOME and KUBECONFIG.
type env struct {
	t          *testing.T
	bin        string
	home       string
	kubeconfig string
}

func newEnv(t *testing.T) *env {
	bin := os.Getenv("HWK_BIN")
	if bin == "" {
		bin = "../bin/hwk"
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("no hwk binary at %s (make build, or set HWK_BIN): %v", abs, err)
	}
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	// A context the user already had, which no hwk command may touch.
	if err := os.WriteFile(kc, []byte(userKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, bin: abs, home: filepath.Join(dir, "hwk"), kubeconfig: kc}
}

const userKubeconfig = `apiVersion: v1
kind: Config
clusters:
- cluster: {server: "https://example.invalid:6443"}
  name: mine
contexts:
- context: {cluster: mine, user: me}
  name: mine
current-context: mine
users:
- name: me
  user: {token: secret}
`

func (e *env) cmd(args ...string) *exec.Cmd {
	c := exec.Command(e.bin, args...)
	c.Env = append(os.Environ(), "HWK_HOME="+e.home, "KUBECONFIG="+e.kubeconfig)
	return c
}

// hwk runs hwk and returns stdout and stderr; a non-zero exit is err.
func (e *env) hwk(args ...string) (string, string, error) {
	e.t.Helper()
	c := e.cmd(args...)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	e.t.Logf("hwk %s (exit %v)\n%s%s", strings.Join(args, " "), err, errOut.String(), out.String())
	return out.String(), errOut.String(), err
}

// docker runs the docker CLI and returns its output.
func docker(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	c := exec.Command("docker", args...)
	if stdin != nil {
		c.Stdin = bytes.NewReader(stdin)
	}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// leftovers lists every container, network and volume labelled with the
// cluster's name, and the privilege probes its up made.
func leftovers(t *testing.T, cluster string) []string {
	t.Helper()
	filter := "label=hwk.dev/cluster=" + cluster
	var out []string
	for _, kind := range []string{"container", "network", "volume"} {
		args := []string{kind, "ls", "-q", "--filter", filter}
		if kind == "container" {
			args = []string{"ps", "-aq", "--filter", filter}
		}
		for _, id := range strings.Fields(docker(t, nil, args...)) {
			out = append(out, kind+" "+id)
		}
	}
	// The privilege probe an up makes for a moment (a killed up leaves it).
	for _, id := range strings.Fields(docker(t, nil, "ps", "-aq", "--filter", "label=hwk.dev/probe-for="+cluster)) {
		out = append(out, "probe container "+id)
	}
	return out
}

// assertGone checks that nothing of the cluster is left: no container,
// network or volume, no kubeconfig context, no cluster directory, and
// that the user's own context is untouched; no lock file or subnet
// reservation either.
func (e *env) assertGone(cluster string) {
	e.t.Helper()
	if l := leftovers(e.t, cluster); len(l) > 0 {
		e.t.Errorf("cluster %s left %v", cluster, l)
	}
	cfg, err := clientcmd.LoadFromFile(e.kubeconfig)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, ok := cfg.Contexts["hwk-"+cluster]; ok {
		e.t.Errorf("kubeconfig still has context hwk-%s", cluster)
	}
	if _, ok := cfg.Contexts["mine"]; !ok || cfg.AuthInfos["me"] == nil || cfg.AuthInfos["me"].Token != "secret" {
		e.t.Errorf("the user's own kubeconfig entries changed: %+v", cfg)
	}
	if _, err := os.Stat(filepath.Join(e.home, "data", "clusters", cluster)); !os.IsNotExist(err) {
		e.t.Errorf("cluster directory of %s is still there (%v)", cluster, err)
	}
	for _, f := range []string{filepath.Join("locks", cluster+".lock"), filepath.Join("subnets", cluster)} {
		if _, err := os.Stat(filepath.Join(e.home, "data", f)); !os.IsNotExist(err) {
			e.t.Errorf("%s of %s is still there (%v)", f, cluster, err)
		}
	}
}

// TestUpWithoutWindowsImage: the default cluster has a Windows worker; with
// no Windows node image, up fails before making anything and says how to
// get a Linux-only cluster.
func TestUpWithoutWindowsImage(t *testing.T) {
	e := newEnv(t)
	_, stderr, err := e.hwk("up", "--name", "e2e-nowin")
	if err == nil {
		t.Fatal("up with a Windows worker and no Windows image succeeded")
	}
	if !strings.Contains(stderr, "hwk up --windows-workers 0") || !strings.Contains(stderr, "Checking the host") {
		t.Errorf("up did not give the Linux-only advice:\n%s", stderr)
	}
	e.assertGone("e2e-nowin")
}

// TestInterruptedUp: an up stopped by SIGINT while nodes are being made,
// and another during kubeadm init, leave nothing once down has run.
func TestInterruptedUp(t *testing.T) {
	for _, tc := range []struct {
		step  string
		after time.Duration
	}{
		{"• Creating nodes", 500 * time.Millisecond},
		{"• Starting the control plane", 3 * time.Second},
	} {
		t.Run(strings.Fields(tc.step)[1], func(t *testing.T) {
			e := newEnv(t)
			name := "e2e-int"
			c, stderr := startUpUntil(t, e, name, tc.step)
			time.Sleep(tc.after)
			if err := c.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			err := c.Wait()
			t.Logf("interrupted up (exit %v):\n%s", err, stderr.String())
			if err == nil {
				t.Fatal("an interrupted up exited 0")
			}
			if !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("up did not say it was interrupted")
			}
			if _, _, err := e.hwk("down", "--name", name); err != nil {
				t.Fatalf("down after an interrupted up: %v", err)
			}
			e.assertGone(name)
		})
	}
}

// lineWatcher collects a process's stderr and closes seen when want
// appears in it.
type lineWatcher struct {
	buf  bytes.Buffer
	want string
	seen chan struct{}
	done bool
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.want) {
		w.done = true
		close(w.seen)
	}
	return len(p), nil
}

func (w *lineWatcher) String() string { return w.buf.String() }

// TestLinuxCluster is the main path: up a control plane and a Linux
// worker, check networking, DNS and the host's kubectl, route Windows
// workloads onto a registered Windows Node, validate the Windows join
// config with kubeadm, and down.
func TestLinuxCluster(t *testing.T) {
	e := newEnv(t)
	const name = "e2e"
	cp, worker := name+"-cp", name+"-linux-1"
	t.Cleanup(func() {
		if t.Failed() {
			e.hwk("get", "nodes", "--name", name)
		}
		e.hwk("down", "--name", name)
	})

	stdout, _, err := e.hwk("up", "--name", name, "--windows-workers", "0", "--linux-workers", "1", "--driver", "docker")
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	m := regexp.MustCompile(`API server after (\S+), all nodes Ready after (\S+) \((\S+) in all\)`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("up did not report its times:\n%s", stdout)
	}
	fmt.Printf("E2E TIMES: API server ready %s, all nodes Ready %s, up total %s\n", m[1], m[2], m[3])

	kubectl := copyKubectl(t, cp)
	out, err := exec.Command(kubectl, "--kubeconfig", e.kubeconfig, "--context", "hwk-"+name, "get", "nodes", "--no-headers").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl from the host: %v\n%s", err, out)
	}
	for _, n := range []string{cp, worker} {
		if !regexp.MustCompile(`(?m)^` + n + `\s+Ready\s`).Match(out) {
			t.Errorf("kubectl get nodes does not show %s Ready:\n%s", n, out)
		}
	}

	cs := client(t, e.kubeconfig, "hwk-"+name)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	t.Run("calico from source", func(t *testing.T) {
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app in (calico-node, calico-kube-controllers, kube-dns)"})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 4 { // calico-node ×2, kube-controllers, coredns (one replica)
			t.Errorf("%d Calico and CoreDNS pods, want 4", len(pods.Items))
		}
		for _, p := range pods.Items {
			if !bootstrap.PodReady(&p) {
				t.Errorf("pod %s is not Ready", p.Name)
			}
		}
		var info struct {
			Info struct {
				ImageSpec struct {
					Config struct{ Labels map[string]string }
				}
			}
		}
		raw := docker(t, nil, "exec", cp, "crictl", "inspecti", "-o", "json", "quay.io/calico/node:v3.31.0")
		if err := json.Unmarshal([]byte(raw), &info); err != nil {
			t.Fatalf("crictl inspecti: %v\n%s", err, raw)
		}
		if got := info.Info.ImageSpec.Config.Labels["dev.hwk.built-from"]; got != "source" {
			t.Errorf("calico/node image built from %q, want source", got)
		}
	})

	t.Run("load-image", func(t *testing.T) { testLoadImage(t, e, cs, name, cp, worker) })

	t.Run("pod network and DNS", func(t *testing.T) {
		server := probePod("probe-server", cp, "serve")
		server.Spec.RestartPolicy = corev1.RestartPolicyAlways
		if _, err := cs.CoreV1().Pods("default").Create(ctx, server, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sp := waitPod(t, cs, "probe-server", func(p *corev1.Pod) bool { return bootstrap.PodReady(p) && p.Status.PodIP != "" })
		url := fmt.Sprintf("http://%s:8080/", sp.Status.PodIP)
		client := probePod("probe-client", worker, "check", "kubernetes.default", url)
		if _, err := cs.CoreV1().Pods("default").Create(ctx, client, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cp := waitPod(t, cs, "probe-client", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		})
		logs, err := cs.CoreV1().Pods("default").GetLogs("probe-client", &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("probe-client on %s:\n%s", cp.Spec.NodeName, logs)
		if cp.Status.Phase != corev1.PodSucceeded {
			t.Fatalf("probe-client failed")
		}
		if !strings.Contains(string(logs), "OK resolve kubernetes.default = [10.96.0.1]") ||
			!strings.Contains(string(logs), "hello from probe-server") {
			t.Errorf("probe-client did not resolve kubernetes.default and reach probe-server across nodes")
		}
		if sp.Spec.NodeName == cp.Spec.NodeName {
			t.Errorf("server and client ran on the same node %s", sp.Spec.NodeName)
		}
		// Across nodes, pod traffic goes through Calico's VXLAN device.
		if route := docker(t, nil, "exec", cp.Spec.NodeName, "ip", "route", "get", sp.Status.PodIP); !strings.Contains(route, "dev vxlan.calico") {
			t.Errorf("%s routes %s outside VXLAN: %s", cp.Spec.NodeName, sp.Status.PodIP, route)
		}
	})

	t.Run("udp flows follow a new endpoint", func(t *testing.T) { testUDPConntrack(t, cs, cp, worker) })

	t.Run("windows routing", func(t *testing.T) {
		const win = "e2e-win-1"
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: win, Labels: map[string]string{
				"kubernetes.io/os": "windows", "kubernetes.io/arch": "amd64",
				"node.kubernetes.io/windows-build": config.WindowsBuilds["2022"],
			}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}}},
		}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// What a kubelet would report, so the scheduler has room to place
		// pods (a Node without capacity fits none).
		capacity := corev1.ResourceList{
			corev1.ResourcePods:   resource.MustParse("110"),
			corev1.ResourceCPU:    resource.MustParse("2"),
			corev1.ResourceMemory: resource.MustParse("6Gi"),
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := cs.CoreV1().Nodes().Get(ctx, win, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Status.Capacity, n.Status.Allocatable = capacity, capacity
			_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		wantDS := map[string]bool{"calico-node-windows": true, "kube-proxy-windows": true, "calico-node": false, "kube-proxy": false}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			got := daemonSetPodsOn(t, cs, win)
			missing := false
			for ds, want := range wantDS {
				if !want && got[ds] {
					t.Fatalf("Linux DaemonSet %s made a pod for the Windows node", ds)
				}
				if want && !got[ds] {
					missing = true
				}
			}
			if !missing {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("DaemonSet pods for %s: %v, want calico-node-windows and kube-proxy-windows", win, got)
			}
			time.Sleep(2 * time.Second)
		}
		// A while more: a Linux DaemonSet pod must not appear late either.
		time.Sleep(5 * time.Second)
		for ds, want := range wantDS {
			if got := daemonSetPodsOn(t, cs, win); got[ds] != want {
				t.Errorf("DaemonSet %s has a pod for %s: %v, want %v", ds, win, got[ds], want)
			}
		}

		rc := bootstrap.RuntimeClassName("2022")
		if _, err := cs.NodeV1().RuntimeClasses().Get(ctx, rc, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "windows-workload"},
			Spec: corev1.PodSpec{
				RuntimeClassName: ptr.To(rc),
				OS:               &corev1.PodOS{Name: corev1.Windows},
				// No kubelet stands behind the Node, so the node
				// lifecycle controller marks it not ready; only that
				// is tolerated here, the os=windows taint is the
				// RuntimeClass's to tolerate.
				Tolerations: []corev1.Toleration{
					{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists},
					{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists},
				},
				Containers: []corev1.Container{{Name: "app", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022"}},
			},
		}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := waitPod(t, cs, "windows-workload", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
		if p.Spec.NodeName != win {
			t.Errorf("the Windows workload went to %s, want %s", p.Spec.NodeName, win)
		}
	})

	t.Run("windows join config", func(t *testing.T) {
		rec, err := config.Load(filepath.Join(e.home, "data", "clusters", name, "cluster.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		token, err := os.ReadFile(filepath.Join(e.home, "data", "clusters", name, "bootstrap-token"))
		if err != nil {
			t.Fatal(err)
		}
		rec.Nodes = append(rec.Nodes, config.Node{Name: "e2e-win-1", Role: config.Worker, OS: config.Windows, IP: "172.31.250.20", WindowsVersion: "2022"})
		bc, err := bootstrap.FromConfig(rec, strings.TrimSpace(string(token)), func(config.Node) bool { return false })
		if err != nil {
			t.Fatal(err)
		}
		hash, err := bootstrap.CACertHash([]byte(docker(t, nil, "exec", cp, "cat", "/etc/kubernetes/pki/ca.crt")))
		if err != nil {
			t.Fatal(err)
		}
		join, err := bootstrap.JoinConfig(bc, bc.Workers[len(bc.Workers)-1], hash)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("Windows join config:\n%s", join)
		validate := func(cfg []byte) (string, error) {
			docker(t, cfg, "exec", "-i", cp, "sh", "-c", "cat > /root/join-windows.yaml")
			out, err := exec.Command("docker", "exec", cp, "kubeadm", "config", "validate", "--config", "/root/join-windows.yaml").CombinedOutput()
			return string(out), err
		}
		if out, err := validate(join); err != nil {
			t.Errorf("kubeadm config validate rejects the Windows join config: %v\n%s", err, out)
		}
		// The control: kubeadm does check what it is given.
		bad := bytes.Replace(join, []byte(strings.TrimSpace(string(token))), []byte("not-a-token"), 1)
		if out, err := validate(bad); err == nil {
			t.Errorf("kubeadm config validate accepted a broken token:\n%s", out)
		}
	})

	if _, _, err := e.hwk("down", "--name", name); err != nil {
		t.Fatalf("down: %v", err)
	}
	e.assertGone(name)
	stdout, _, err = e.hwk("down", "--name", name)
	if err != nil || !strings.Contains(stdout, "no cluster") {
		t.Errorf("a second down: %v, %q; want exit 0 and no cluster", err, stdout)
	}
}

func client(t *testing.T, kubeconfig, context string) kubernetes.Interface {
	t.Helper()
	rest, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rest)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// copyKubectl takes the node's kubectl (a Linux binary built from the same
// Kubernetes) to the host: CI machines have none of their own.
func copyKubectl(t *testing.T, node string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubectl")
	out, err := exec.Command("docker", "exec", node, "cat", "/usr/local/bin/kubectl").Output()
	if err != nil {
		t.Fatalf("copy kubectl from %s: %v", node, err)
	}
	if err := os.WriteFile(path, out, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func waitPod(t *testing.T, cs kubernetes.Interface, name string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		p, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && done(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: %v, status %+v", name, err, p.Status)
		}
		time.Sleep(time.Second)
	}
}

// daemonSetPodsOn reports which kube-system DaemonSets have a pod meant
// for node: bound to it, or (not yet scheduled) pinned to it by the
// DaemonSet controller's node affinity.
func daemonSetPodsOn(t *testing.T, cs kubernetes.Interface, node string) map[string]bool {
	t.Helper()
	pods, err := cs.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		owner := metav1.GetControllerOf(&p)
		if owner == nil || owner.Kind != "DaemonSet" {
			continue
		}
		if p.Spec.NodeName == node || strings.Contains(fmt.Sprint(p.Spec.Affinity), node) {
			out[owner.Name] = true
		}
	}
	return out
}
