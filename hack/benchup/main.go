// Command benchup measures `hwk up` of Linux clusters on the docker driver:
// N runs each of a 1-node and a 2-node cluster (a control plane and a
// worker), and for every phase the min, median and max:
//
//   - every step `hwk up` prints, with the time it prints;
//   - inside the wait, from the start of up: the API server answering (up's
//     own figure), each node Ready, and the last pod of calico-node,
//     calico-kube-controllers, kube-proxy and CoreDNS Ready (from the
//     conditions' transition times, which the API server keeps in whole
//     seconds, so these are good to a second);
//   - the idle memory of each node after -idle: the node container's memory
//     as `docker stats` reports it (the cgroup's usage less inactive file
//     pages), and its split by program (the PSS of every process, summed by
//     executable: etcd, kube-apiserver, ... and the rest);
//   - `hwk stop` then `hwk start` of the same cluster, and `hwk down`.
//
// Last it prints the medians on lines a script can read:
//
//	up median: 1 node 19.2s, 2 nodes 23.0s
//	api median: 1 node 6.1s, 2 nodes 6.3s
//	node memory median: 640 MiB
//	start median: 1 node 8.1s, 2 nodes 9.0s
//
// Run it with `make bench-up` (root, a Docker engine and the node image in
// docker format); ARGS="-runs 3" changes the number of runs.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	units "github.com/docker/go-units"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const clusterName = "hwkbenchup"

// workloads are the system pods whose readiness the wait reports, by their
// k8s-app label.
var workloads = []string{"calico-node", "calico-kube-controllers", "kube-proxy", "kube-dns"}

// programs are the processes the memory split names; the rest is "other".
// calico-kube-controllers' executable is kube-controllers.
var programs = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet",
	"containerd", "containerd-shim-runc-v2", "calico-node", "kube-controllers", "coredns", "kube-proxy", "pause"}

func main() {
	hwkBin := flag.String("hwk", "bin/hwk", "hwk binary")
	runs := flag.Int("runs", 5, "runs of each cluster size")
	sizes := flag.String("nodes", "1,2", "cluster sizes to measure (nodes, comma-separated)")
	idle := flag.Duration("idle", time.Minute, "how long a cluster idles after up before its memory is read")
	flag.Parse()
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fail(fmt.Errorf("-nodes %q: want sizes like 1,2", *sizes))
		}
		ns = append(ns, n)
	}
	tmp, err := os.MkdirTemp("", "benchup")
	if err != nil {
		fail(err)
	}
	cleanup = func() { os.RemoveAll(tmp) }
	defer cleanup()
	b := &bench{hwk: *hwkBin, kubeconfig: filepath.Join(tmp, "kubeconfig"), idle: *idle}
	// A cluster an interrupted run left behind.
	_, _ = b.hwkOut("down", "--name", clusterName)

	fmt.Printf("hwk up on the docker driver: %d runs each of %v nodes, memory after %s idle; %d CPUs, %s/%s\n",
		*runs, ns, *idle, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	results := map[int][]*run{}
	for _, n := range ns {
		for i := range *runs {
			r, err := b.measure(n)
			if err != nil {
				_, _ = b.hwkOut("down", "--name", clusterName)
				fail(fmt.Errorf("%d nodes, run %d: %w", n, i+1, err))
			}
			fmt.Fprintf(os.Stderr, "  %d node(s), run %d: up %.1fs (API %.1fs), control plane %s MiB, start %.1fs\n",
				n, i+1, r.phases["up total"], r.phases["API server answering"], mib(r.memory[0].total), r.phases["start: total"])
			results[n] = append(results[n], r)
		}
	}
	for _, n := range ns {
		report(os.Stdout, n, results[n])
	}
	fmt.Println()
	printMedians(os.Stdout, ns, results)
}

// printMedians prints the lines a script reads: the median of up's total,
// of the API server answering and of start's total for each cluster size,
// and the idle memory of the smallest cluster's control plane (the node a
// one-node cluster is).
func printMedians(w io.Writer, ns []int, results map[int][]*run) {
	var up, api, start []string
	for _, n := range ns {
		label := fmt.Sprintf("%d nodes", n)
		if n == 1 {
			label = "1 node"
		}
		up = append(up, fmt.Sprintf("%s %.1fs", label, median(collect(results[n], "up total"))))
		api = append(api, fmt.Sprintf("%s %.1fs", label, median(collect(results[n], "API server answering"))))
		start = append(start, fmt.Sprintf("%s %.1fs", label, median(collect(results[n], "start: total"))))
	}
	fmt.Fprintf(w, "up median: %s\n", strings.Join(up, ", "))
	fmt.Fprintf(w, "api median: %s\n", strings.Join(api, ", "))
	var cp []float64
	for _, r := range results[ns[0]] {
		cp = append(cp, float64(r.memory[0].total))
	}
	fmt.Fprintf(w, "node memory median: %s MiB\n", mib(int64(median(cp))))
	fmt.Fprintf(w, "start median: %s\n", strings.Join(start, ", "))
}

type bench struct {
	hwk        string
	kubeconfig string
	idle       time.Duration
}

// run is one cluster's figures: phases in seconds (by name, in order) and
// each node's memory.
type run struct {
	order  []string
	phases map[string]float64
	memory []nodeMemory
}

func (r *run) add(name string, seconds float64) {
	if _, ok := r.phases[name]; !ok {
		r.order = append(r.order, name)
	}
	r.phases[name] = seconds
}

type nodeMemory struct {
	node, role string
	total      int64            // bytes, as docker stats reports
	programs   map[string]int64 // PSS bytes by program
}

// stepLine is a finished step as up, start and down print it when the
// output is not a terminal.
var stepLine = regexp.MustCompile(`^✓ (.*) \(([0-9.]+(?:ns|µs|ms|s|m[0-9.]*s?|h[0-9.ms]*))\)$`)

// summary is up's and start's last line: `... API server after 5.1s, all
// nodes Ready after 6.4s ...`.
var summary = regexp.MustCompile(`API server after ([^,]+), all nodes Ready after ([0-9.a-zµ]+)`)

func (b *bench) measure(nodes int) (*run, error) {
	r := &run{phases: map[string]float64{}}
	start := time.Now()
	out, err := b.hwkOut("up", "--name", clusterName, "--driver", "docker", "--windows-workers", "0",
		"--linux-workers", strconv.Itoa(nodes-1), "--kubeconfig", b.kubeconfig)
	total := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("hwk up: %w\n%s", err, out)
	}
	upEnd := time.Now()
	if err := steps(r, "", out); err != nil {
		return nil, fmt.Errorf("hwk up: %w\n%s", err, out)
	}
	api, ready, err := summaryFigures(out)
	if err != nil {
		return nil, fmt.Errorf("hwk up: %w", err)
	}
	r.add("API server answering", api)
	if err := b.readiness(r, start); err != nil {
		return nil, err
	}
	r.add("all nodes Ready (up's figure)", ready)
	r.add("up total", total.Seconds())

	time.Sleep(time.Until(upEnd.Add(b.idle)))
	if r.memory, err = b.memory(); err != nil {
		return nil, err
	}

	for _, cmd := range []string{"stop", "start"} {
		t := time.Now()
		out, err := b.hwkOut(cmd, "--name", clusterName)
		if err != nil {
			return nil, fmt.Errorf("hwk %s: %w\n%s", cmd, err, out)
		}
		if cmd == "start" {
			if err := steps(r, "start: ", out); err != nil {
				return nil, fmt.Errorf("hwk start: %w\n%s", err, out)
			}
			api, ready, err := summaryFigures(out)
			if err != nil {
				return nil, fmt.Errorf("hwk start: %w", err)
			}
			r.add("start: API server answering", api)
			r.add("start: all nodes Ready", ready)
		}
		r.add(cmd+": total", time.Since(t).Seconds())
	}
	t := time.Now()
	if out, err := b.hwkOut("down", "--name", clusterName); err != nil {
		return nil, fmt.Errorf("hwk down: %w\n%s", err, out)
	}
	r.add("down: total", time.Since(t).Seconds())
	return r, nil
}

// steps adds the steps a command printed, as "prefix step NAME".
func steps(r *run, prefix, out string) error {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := stepLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		d, err := time.ParseDuration(m[2])
		if err != nil {
			return fmt.Errorf("step %q: %w", m[1], err)
		}
		r.add(prefix+"step "+m[1], d.Seconds())
		n++
	}
	if n == 0 {
		return fmt.Errorf("no step lines (✓ NAME (TIME)) in its output")
	}
	return nil
}

func summaryFigures(out string) (api, ready float64, err error) {
	m := summary.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, fmt.Errorf("no line saying \"API server after ..., all nodes Ready after ...\" in:\n%s", out)
	}
	a, err1 := time.ParseDuration(m[1])
	r, err2 := time.ParseDuration(strings.TrimSuffix(m[2], "."))
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("summary %q: cannot read its times", m[0])
	}
	return a.Seconds(), r.Seconds(), nil
}

// readiness adds when each node and the last pod of each system workload
// turned Ready, from the start of up.
func (b *bench) readiness(r *run, start time.Time) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", b.kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	since := func(t metav1.Time) float64 { return t.Sub(start).Seconds() }
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	for _, n := range nodes.Items {
		role := "worker"
		if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok {
			role = "control plane"
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				r.add("node Ready: "+role, since(c.LastTransitionTime))
			}
		}
	}
	for _, app := range workloads {
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=" + app})
		if err != nil {
			return err
		}
		var last float64
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					last = max(last, since(c.LastTransitionTime))
				}
			}
		}
		if len(pods.Items) == 0 || last == 0 {
			return fmt.Errorf("no Ready pod with k8s-app=%s after up", app)
		}
		name := app
		if app == "kube-dns" {
			name = "coredns"
		}
		r.add("pods Ready: "+name, last)
	}
	return nil
}

type listedNode struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// memory reads each node container's memory and its split by program.
func (b *bench) memory() ([]nodeMemory, error) {
	out, err := b.hwkOut("get", "nodes", "--name", clusterName, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("hwk get nodes: %w\n%s", err, out)
	}
	var nodes []listedNode
	if err := json.Unmarshal([]byte(out), &nodes); err != nil {
		return nil, fmt.Errorf("hwk get nodes: %w", err)
	}
	var ms []nodeMemory
	for _, n := range nodes {
		m := nodeMemory{node: n.Name, role: n.Role, programs: map[string]int64{}}
		stats, err := exec.Command("docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", n.Name).Output()
		if err != nil {
			return nil, fmt.Errorf("docker stats %s: %w", n.Name, err)
		}
		if m.total, err = memUsage(string(stats)); err != nil {
			return nil, fmt.Errorf("docker stats %s: %w", n.Name, err)
		}
		top, err := exec.Command("docker", "top", n.Name, "-eo", "pid").Output()
		if err != nil {
			return nil, fmt.Errorf("docker top %s: %w", n.Name, err)
		}
		for _, pid := range topPIDs(string(top)) {
			prog, pss, ok := processMemory(pid)
			if !ok {
				continue // gone, or a kernel thread
			}
			m.programs[prog] += pss
		}
		ms = append(ms, m)
	}
	// The control plane first, as the report expects.
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].role == "control-plane" && ms[j].role != "control-plane" })
	return ms, nil
}

// memUsage reads the used part of docker stats' MemUsage column ("812.3MiB
// / 23.47GiB"): docker prints it with go-units' BytesSize (binary units),
// which RAMInBytes reads back.
func memUsage(stats string) (int64, error) {
	used, _, ok := strings.Cut(strings.TrimSpace(stats), " / ")
	if !ok {
		return 0, fmt.Errorf("MemUsage %q: want USED / LIMIT", strings.TrimSpace(stats))
	}
	return units.RAMInBytes(used)
}

// topPIDs reads the pids docker top NAME -eo pid prints under its PID
// header.
func topPIDs(top string) []int {
	var pids []int
	for _, f := range strings.Fields(top) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processMemory is a host process's program (one of programs, else
// "other") and its PSS in bytes.
func processMemory(pid int) (string, int64, bool) {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "", 0, false
	}
	smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return "", 0, false
	}
	return programPSS(cmdline, smaps)
}

// programPSS reads a process's program from its /proc/PID/cmdline (argv[0]'s
// base name, "other" when programs does not name it) and its PSS from its
// /proc/PID/smaps_rollup. A kernel thread has an empty cmdline.
func programPSS(cmdline, smaps []byte) (string, int64, bool) {
	if len(cmdline) == 0 {
		return "", 0, false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	for _, line := range strings.Split(string(smaps), "\n") {
		if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return "", 0, false
			}
			prog := filepath.Base(string(argv0))
			if !slices.Contains(programs, prog) {
				prog = "other"
			}
			return prog, kb << 10, true
		}
	}
	return "", 0, false
}

// report prints one cluster size's table: every phase's min, median and
// max, and each node's median memory by program.
func report(w io.Writer, nodes int, runs []*run) {
	fmt.Fprintf(w, "\n%d node(s), %d runs: seconds                            min   median      max\n", nodes, len(runs))
	for _, name := range runs[0].order {
		xs := collect(runs, name)
		if len(xs) < len(runs) {
			name += fmt.Sprintf(" (in %d runs)", len(xs))
		}
		fmt.Fprintf(w, "  %-56s %7.1f %8.1f %8.1f\n", name, slices.Min(xs), median(xs), slices.Max(xs))
	}
	for i, m := range runs[0].memory {
		fmt.Fprintf(w, "  memory of the %s node after idling, MiB (median; PSS by program)\n", m.role)
		var totals []float64
		for _, r := range runs {
			totals = append(totals, float64(r.memory[i].total))
		}
		fmt.Fprintf(w, "    %-38s %8s\n", "node (docker stats)", mib(int64(median(totals))))
		for _, p := range append(slices.Clone(programs), "other") {
			var xs []float64
			for _, r := range runs {
				xs = append(xs, float64(r.memory[i].programs[p]))
			}
			if median(xs) == 0 {
				continue
			}
			fmt.Fprintf(w, "    %-38s %8s\n", p, mib(int64(median(xs))))
		}
	}
}

func collect(runs []*run, name string) []float64 {
	var xs []float64
	for _, r := range runs {
		if v, ok := r.phases[name]; ok {
			xs = append(xs, v)
		}
	}
	return xs
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mib(b int64) string { return strconv.FormatInt((b+1<<19)>>20, 10) }

func (b *bench) hwkOut(args ...string) (string, error) {
	cmd := exec.Command(b.hwk, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// cleanup removes the run's files, also when it fails.
var cleanup = func() {}

func fail(err error) {
	cleanup()
	fmt.Fprintln(os.Stderr, "bench-up:", err)
	os.Exit(1)
}
