//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/internal/logs"
)

// TestSurvivesRestarts: a two-node cluster comes back by itself after the
// Docker engine restarts, through the kubeconfig context up wrote, with a
// pod made before the restart running again; then hwk stop / hwk start
// keep its addresses and certificates, and hwk status says stopped (exit
// 1) and running (exit 0).
func TestSurvivesRestarts(t *testing.T) {
	e := newEnv(t)
	const name = "e2e-sv"
	cp, worker := name+"-cp", name+"-linux-1"
	t.Cleanup(func() {
		if t.Failed() {
			e.hwk("get", "nodes", "--name", name)
		}
		e.hwk("down", "--name", name)
	})
	if _, _, err := e.hwk("up", "--name", name, "--windows-workers", "0", "--linux-workers", "1", "--driver", "docker"); err != nil {
		t.Fatalf("up: %v", err)
	}
	kubeconfigBefore, err := os.ReadFile(e.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs := client(t, e.kubeconfig, "hwk-"+name)
	ctx := context.Background()

	buildProbe(t, probeImage)
	if _, _, err := e.hwk("load-image", "--name", name, probeImage); err != nil {
		t.Fatalf("load-image: %v", err)
	}
	server := probePod("survivor", worker, "serve")
	server.Spec.RestartPolicy = corev1.RestartPolicyAlways
	if _, err := cs.CoreV1().Pods("default").Create(ctx, server, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, "survivor", bootstrap.PodReady)
	ips := nodeIPs(t, cp, worker)
	cert := apiServerCert(t, cp)

	t.Run("exec and ssh", func(t *testing.T) {
		run := func(stdin string, args ...string) (string, int) {
			c := e.cmd(args...)
			c.Stdin = strings.NewReader(stdin)
			out, err := c.CombinedOutput()
			t.Logf("hwk %s: %v\n%s", strings.Join(args, " "), err, out)
			if ee, ok := err.(*exec.ExitError); ok {
				return string(out), ee.ExitCode()
			}
			if err != nil {
				t.Fatal(err)
			}
			return string(out), 0
		}
		if out, code := run("", "exec", cp, "--name", name, "--", "hostname"); code != 0 || strings.TrimSpace(out) != cp {
			t.Errorf("exec hostname: %q, exit %d", out, code)
		}
		if _, code := run("", "exec", cp, "--name", name, "--", "sh", "-c", "exit 3"); code != 3 {
			t.Errorf("exec of a command that exits 3: exit %d", code)
		}
		if out, code := run("piped in\n", "exec", worker, "--name", name, "--", "cat"); code != 0 || out != "piped in\n" {
			t.Errorf("exec cat with stdin: %q, exit %d", out, code)
		}
		if out, code := run("echo via-ssh $(hostname); exit 4\n", "ssh", worker, "--name", name); code != 4 || !strings.Contains(out, "via-ssh "+worker) {
			t.Errorf("ssh with commands on stdin: %q, exit %d", out, code)
		}
		if out, code := run("", "exec", "nope", "--name", name, "--", "true"); code != 1 || !strings.Contains(out, "its nodes are "+cp+", "+worker) {
			t.Errorf("exec on a node that is not there: %q, exit %d", out, code)
		}
	})

	t.Run("engine restart", func(t *testing.T) {
		// The engine is the machine's, not the test's: it is stopped
		// and started again only where the machine is there for the
		// test (a CI runner) and says so.
		if os.Getenv("HWK_E2E_RESTART_ENGINE") != "1" {
			t.Skip("restarting the Docker engine stops every container on it: set HWK_E2E_RESTART_ENGINE=1 on a machine that is there for the test (ci.yml's e2e job does)")
		}
		back := restartDockerEngine(t)
		ready := waitBack(t, cs, back, cp, worker)
		// System pods (CoreDNS, calico-kube-controllers) come back after
		// the nodes; status reports the cluster healthy only then.
		healthy := waitHealthy(t, e, name, back)
		// Figures for .ci/run's table, not limits: a slow machine is not
		// a failure.
		fmt.Printf("E2E RESTART: cluster Ready %s, healthy %s after the Docker engine answered again\n", ready.Round(100*time.Millisecond), healthy.Round(100*time.Millisecond))
		after, err := os.ReadFile(e.kubeconfig)
		if err != nil || !bytes.Equal(after, kubeconfigBefore) {
			t.Errorf("the kubeconfig changed across the restart (%v)", err)
		}
		if got := nodeIPs(t, cp, worker); got != ips {
			t.Errorf("node addresses %s after the restart, %s before", got, ips)
		}
	})

	t.Run("stop and start", func(t *testing.T) {
		if _, _, err := e.hwk("stop", "--name", name); err != nil {
			t.Fatalf("stop: %v", err)
		}
		if _, _, err := e.hwk("status", "--name", name); err == nil {
			t.Error("status of a stopped cluster exited 0")
		} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("status of a stopped cluster: %v, want exit 1", err)
		}
		out, _, err := e.hwk("get", "nodes", "--name", name, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var nodes []struct{ Name, Machine string }
		if err := json.Unmarshal([]byte(out), &nodes); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if !strings.HasPrefix(n.Machine, "stopped") {
				t.Errorf("get nodes shows %s as %q while stopped", n.Name, n.Machine)
			}
		}
		began := time.Now()
		out, _, err = e.hwk("start", "--name", name)
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		m := regexp.MustCompile(`API server after (\S+), all nodes Ready after (\S+)\.`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("start did not report its times:\n%s", out)
		}
		fmt.Printf("E2E START: API server after %s, all nodes Ready after %s (hwk start took %s)\n", m[1], m[2], time.Since(began).Round(100*time.Millisecond))
		if _, _, err := e.hwk("status", "--name", name); err != nil {
			t.Errorf("status after start: %v", err)
		}
		if got := nodeIPs(t, cp, worker); got != ips {
			t.Errorf("node addresses %s after start, %s before", got, ips)
		}
		if got := apiServerCert(t, cp); got != cert {
			t.Error("the API server's certificate changed across stop and start")
		}
		waitBack(t, cs, began, cp, worker)
		// The kubelet's drop-in made the Service range unreachable
		// again at boot (bootstrap's kubeletServiceRoute).
		for _, n := range []string{cp, worker} {
			if got := docker(t, nil, "exec", n, "ip", "route", "show", "type", "unreachable"); !strings.Contains(got, "10.96.0.0/12") {
				t.Errorf("%s after start has no unreachable route for the Service range: %q", n, got)
			}
		}
	})

	t.Run("export logs", func(t *testing.T) {
		dir := t.TempDir()
		files := exportLogs(t, e, name, dir)
		for _, n := range []string{cp, worker} {
			for _, it := range logs.LinuxItems {
				if !slices.ContainsFunc(files, func(f string) bool { return strings.HasSuffix(f, "/nodes/"+n+"/"+it.File) }) {
					t.Errorf("the archive has no %s of %s", it.File, n)
				}
			}
			if !slices.ContainsFunc(files, func(f string) bool {
				return strings.Contains(f, "/nodes/"+n+"/pods/kube-system_calico-node-") && strings.HasSuffix(f, ".log")
			}) {
				t.Errorf("the archive has no calico-node container log of %s", n)
			}
		}
		for _, f := range []string{"cluster/nodes.yaml", "cluster/pods.yaml", "cluster/events.yaml", "hwk/cluster.yaml", "summary.txt"} {
			if !slices.ContainsFunc(files, func(g string) bool { return strings.HasSuffix(g, "/"+f) }) {
				t.Errorf("the archive has no %s", f)
			}
		}
		// A node that does not answer is recorded; the rest is still
		// collected.
		docker(t, nil, "stop", worker)
		defer docker(t, nil, "start", worker)
		files = exportLogs(t, e, name, t.TempDir())
		if !slices.ContainsFunc(files, func(f string) bool { return strings.HasSuffix(f, "/nodes/"+cp+"/kubelet.journal.log") }) ||
			slices.ContainsFunc(files, func(f string) bool { return strings.Contains(f, "/nodes/"+worker+"/") }) {
			t.Errorf("with %s stopped the archive holds %v", worker, files)
		}
	})
}

// exportLogs runs hwk export logs into dir and lists the archive it
// names; it logs summary.txt.
func exportLogs(t *testing.T, e *env, name, dir string) []string {
	t.Helper()
	out, _, err := e.hwk("export", "logs", dir, "--name", name)
	if err != nil {
		t.Fatalf("export logs: %v", err)
	}
	file := strings.TrimSpace(out)
	if filepath.Dir(file) != dir || !strings.HasSuffix(file, ".tar.gz") {
		t.Fatalf("export logs printed %q, not an archive in %s", file, dir)
	}
	list := strings.Fields(string(mustOutput(t, "tar", "tzf", file)))
	summary := mustOutput(t, "tar", "xzOf", file, strings.TrimSuffix(filepath.Base(file), ".tar.gz")+"/summary.txt")
	t.Logf("%s: %d files; summary.txt:\n%s", file, len(list), summary)
	// On Linux nodes every item works (nft included: the node image has
	// it), so nothing may fail.
	if strings.Contains(string(summary), "failed:") {
		t.Errorf("items failed on a running node:\n%s", summary)
	}
	return list
}

func mustOutput(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}

// nodeIPs are the nodes' addresses on the cluster network, as the engine
// reports them.
func nodeIPs(t *testing.T, nodes ...string) string {
	t.Helper()
	var out []string
	for _, n := range nodes {
		out = append(out, n+"="+strings.TrimSpace(docker(t, nil, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", n)))
	}
	return strings.Join(out, " ")
}

// apiServerCert is the digest of the API server's serving certificate.
func apiServerCert(t *testing.T, cp string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(docker(t, nil, "exec", cp, "cat", "/etc/kubernetes/pki/apiserver.crt")))
	return hex.EncodeToString(sum[:])
}

// waitHealthy runs hwk status until it exits 0 (every node and system
// component ready) and returns how long after since that was.
func waitHealthy(t *testing.T, e *env, name string, since time.Time) time.Duration {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		c := e.cmd("status", "--name", name)
		out, err := c.CombinedOutput()
		if err == nil {
			return time.Since(since)
		}
		if time.Now().After(deadline) {
			t.Fatalf("hwk status never reported cluster %s healthy: %v\n%s", name, err, out)
		}
		time.Sleep(2 * time.Second)
	}
}

// waitBack waits until every node's kubelet has reported Ready since
// since, and the survivor pod runs a container started since then; it
// returns how long after since that was.
func waitBack(t *testing.T, cs kubernetes.Interface, since time.Time, nodes ...string) time.Duration {
	t.Helper()
	ctx := context.Background()
	if err := bootstrap.WaitNodesReadySince(ctx, cs, 5*time.Minute, since.Add(-time.Second), nodes...); err != nil {
		t.Fatalf("the cluster did not come back: %v", err)
	}
	waitPod(t, cs, "survivor", func(p *corev1.Pod) bool {
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Running != nil && !c.State.Running.StartedAt.Time.Before(since.Add(-time.Second).Truncate(time.Second)) && c.Ready {
				return true
			}
		}
		return false
	})
	return time.Since(since)
}

// restartDockerEngine stops the Docker engine the tests talk to (the one
// behind DOCKER_HOST, or the default socket) by its pid, as a reboot
// would, and starts it again with the same command line; where systemd
// runs that very engine, it restarts the unit instead. The engine is
// found from its socket (the pid that listens on it), never by name, so
// that a run against an engine of its own (make ci-cold) restarts that
// one and leaves the system's alone. It returns when the engine answers.
func restartDockerEngine(t *testing.T) time.Time {
	t.Helper()
	pid, err := enginePID()
	if err != nil {
		t.Fatalf("find the Docker engine: %v", err)
	}
	// Under systemd the socket is the engine's own (its MainPID) or, with
	// socket activation (docker.socket), systemd's: pid 1.
	if out, err := exec.Command("systemctl", "show", "-p", "MainPID", "--value", "docker").Output(); err == nil &&
		(pid == 1 || strings.TrimSpace(string(out)) == strconv.Itoa(pid)) {
		if out, err := exec.Command("systemctl", "restart", "docker").CombinedOutput(); err != nil {
			t.Fatalf("systemctl restart docker: %v\n%s", err, out)
		}
		return waitEngine(t)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("dockerd %d: %v", pid, err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatalf("dockerd %d: %v", pid, err)
	}
	t.Logf("stopping dockerd (pid %d: %s)", pid, strings.Join(args, " "))
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("dockerd %d did not stop", pid)
		}
		time.Sleep(200 * time.Millisecond)
	}
	log, err := os.OpenFile("/tmp/hwk-e2e-dockerd.log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	// The same executable (argv[0] may be a bare name resolved on a PATH
	// this process does not have), the same arguments and environment.
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	d := exec.Command(exe, args[1:]...)
	d.Args[0] = args[0]
	if len(env) > 0 {
		d.Env = strings.Split(strings.TrimRight(string(env), "\x00"), "\x00")
	}
	d.Stdout, d.Stderr = log, log
	d.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := d.Start(); err != nil {
		t.Fatalf("start dockerd again: %v", err)
	}
	_ = d.Process.Release()
	return waitEngine(t)
}

// enginePID is the pid of the process listening on the Docker socket:
// the peer credentials of a connection to a listening Unix socket are
// those of the process that listened (unix(7), SO_PEERCRED).
func enginePID() (int, error) {
	sock := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		var ok bool
		if sock, ok = strings.CutPrefix(h, "unix://"); !ok {
			return 0, fmt.Errorf("DOCKER_HOST %q is not a Unix socket: the e2e restarts only a local engine", h)
		}
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer syscall.Close(fd)
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		return 0, fmt.Errorf("connect %s: %w", sock, err)
	}
	cred, err := syscall.GetsockoptUcred(fd, syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	if err != nil {
		return 0, fmt.Errorf("%s: SO_PEERCRED: %w", sock, err)
	}
	if cred.Pid < 1 {
		return 0, fmt.Errorf("%s: no peer pid", sock)
	}
	return int(cred.Pid), nil
}

func waitEngine(t *testing.T) time.Time {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for exec.Command("docker", "version").Run() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the Docker engine did not answer after its restart (log: /tmp/hwk-e2e-dockerd.log)")
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Now()
}

// TestSideBySide: three clusters made at once with default settings each
// get a subnet of their own and answer through their own contexts;
// deleting one leaves the others working.
func TestSideBySide(t *testing.T) {
	e := newEnv(t)
	names := []string{"e2e-a", "e2e-b", "e2e-c"}
	t.Cleanup(func() {
		for _, n := range names {
			e.hwk("down", "--name", n)
		}
	})
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = e.hwk("up", "--name", n, "--windows-workers", "0", "--driver", "docker", "--no-switch-context")
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("up %s: %v", names[i], err)
		}
	}
	subnets := map[netip.Prefix]string{}
	for _, n := range names {
		raw := strings.TrimSpace(docker(t, nil, "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", "hwk-"+n))
		p, err := netip.ParsePrefix(raw)
		if err != nil {
			t.Fatalf("network of %s: %q", n, raw)
		}
		if other, ok := subnets[p]; ok {
			t.Errorf("%s and %s share subnet %s", n, other, p)
		}
		subnets[p] = n
		t.Logf("%s is on %s", n, p)
		reachable(t, e, n)
	}
	if _, _, err := e.hwk("down", "--name", names[1]); err != nil {
		t.Fatal(err)
	}
	e.assertGone(names[1])
	for _, n := range []string{names[0], names[2]} {
		reachable(t, e, n)
		if _, _, err := e.hwk("status", "--name", n); err != nil {
			t.Errorf("status of %s after %s went: %v", n, names[1], err)
		}
	}
	for _, n := range []string{names[0], names[2]} {
		if _, _, err := e.hwk("down", "--name", n); err != nil {
			t.Fatal(err)
		}
		e.assertGone(n)
	}
}

// reachable checks that the cluster's context answers with its own node.
func reachable(t *testing.T, e *env, name string) {
	t.Helper()
	nodes, err := client(t, e.kubeconfig, "hwk-"+name).CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 || nodes.Items[0].Name != name+"-cp" {
		t.Errorf("context hwk-%s: %v %v", name, err, nodes)
	}
}

// TestKilledUp: an up killed outright (SIGKILL, no chance to clean up) at
// three different steps leaves nothing once down has run: no container,
// volume, network, kubeconfig entry, cluster directory, lock file or
// subnet reservation. Each kill must land during the step it names (its
// line printed, its ✓ not): when the step had finished, the kill comes
// earlier on the next try.
func TestKilledUp(t *testing.T) {
	for _, tc := range []struct {
		name, step string
		// after is how long after the step begins the kill comes: the
		// network takes well under a second, so that kill is at once.
		after time.Duration
	}{
		{"network", "• Creating the node network", 0},
		{"nodes", "• Creating nodes", 300 * time.Millisecond},
		{"kubeadm", "• Starting the control plane", 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			const tries = 5
			for i, after := 1, tc.after; ; i, after = i+1, after/2 {
				landed := killUpDuring(t, e, "e2e-kill", tc.step, after)
				if _, _, err := e.hwk("down", "--name", "e2e-kill"); err != nil {
					t.Fatalf("down after a killed up: %v", err)
				}
				e.assertGone("e2e-kill")
				if landed {
					t.Logf("the kill %s after %q began landed in that step (try %d)", after, tc.step, i)
					break
				}
				if i == tries {
					t.Fatalf("in %d tries no kill landed during %q: the step had always finished", tries, tc.step)
				}
				t.Logf("try %d: %q had finished when the kill came %s after it began; trying earlier", i, tc.step, after)
			}
		})
	}
}

// startUpUntil starts an up of a 2-node Linux cluster called name and
// returns once its stderr shows step's line.
func startUpUntil(t *testing.T, e *env, name, step string) (*exec.Cmd, *lineWatcher) {
	t.Helper()
	c := e.cmd("up", "--name", name, "--windows-workers", "0", "--linux-workers", "1", "--driver", "docker")
	stderr := &lineWatcher{want: step, seen: make(chan struct{})}
	c.Stderr = stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stderr.seen:
	case <-time.After(3 * time.Minute):
		_ = c.Process.Kill()
		t.Fatalf("up never reached %q:\n%s", step, stderr.String())
	}
	return c, stderr
}

// killUpDuring starts an up of cluster name, kills it (SIGKILL) after
// the given time from when step's line appears, and reports whether the
// kill came during that step: its ✓ line never printed.
func killUpDuring(t *testing.T, e *env, name, step string, after time.Duration) bool {
	t.Helper()
	c, stderr := startUpUntil(t, e, name, step)
	time.Sleep(after)
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait()
	t.Logf("killed up:\n%s", stderr.String())
	return !strings.Contains(stderr.String(), "✓ "+strings.TrimPrefix(step, "• "))
}
