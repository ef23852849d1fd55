package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStepsAndSummaryFromUp reads a recorded `hwk up --windows-workers 0
// --linux-workers 1` (the quick start's; not a terminal: one line per finished
// step, then the summary) as bench-up does.
func TestStepsAndSummaryFromUp(t *testing.T) {
	out := readTestdata(t, "up.txt")
	r := &run{phases: map[string]float64{}}
	if err := steps(r, "", out); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"step Checking the host", "step Creating the node network", "step Creating nodes",
		"step Starting the control plane (kubeadm init)", "step Installing Calico v3.31.0 and joining the Linux worker",
		"step Installing Windows components", "step Labelling nodes",
		"step Waiting for nodes and calico-node to be Ready", "step Installing CoreDNS and calico-kube-controllers",
		"step Waiting for system pods to be Ready", "step Writing kubeconfig",
	}
	if !slices.Equal(r.order, want) {
		t.Errorf("steps read:\n%s\nwant\n%s", strings.Join(r.order, "\n"), strings.Join(want, "\n"))
	}
	for name, secs := range map[string]float64{
		"step Checking the host":                         0.011,
		"step Starting the control plane (kubeadm init)": 7.1,
		"step Writing kubeconfig":                        0.002,
	} {
		if got := r.phases[name]; !near(got, secs) {
			t.Errorf("%s: %v s, want %v", name, got, secs)
		}
	}
	api, ready, err := summaryFigures(out)
	if err != nil {
		t.Fatal(err)
	}
	if !near(api, 9.9) || !near(ready, 19.9) {
		t.Errorf("summary: API %v s, Ready %v s; want 9.9 and 19.9", api, ready)
	}

	if err := steps(&run{phases: map[string]float64{}}, "", "Cluster \"hwk\" is ready\n"); err == nil {
		t.Error("steps found steps in an output without any")
	}
	if _, _, err := summaryFigures("✓ Creating nodes (1.9s)\n"); err == nil {
		t.Error("summaryFigures read an output without a summary")
	}
}

// TestMemoryParsing reads docker stats' MemUsage, docker top's pids and a
// process's smaps_rollup (recorded from this kind of machine).
func TestMemoryParsing(t *testing.T) {
	for in, want := range map[string]int64{
		"812.3MiB / 23.47GiB\n": 851758284,
		"1.012GiB / 23.47GiB":   1086626725,
		"512KiB / 1GiB":         512 << 10,
	} {
		got, err := memUsage(in)
		if err != nil || got != want {
			t.Errorf("memUsage(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := memUsage("--"); err == nil {
		t.Error("memUsage read a line with no limit")
	}
	if got := topPIDs(readTestdata(t, "top.txt")); !slices.Equal(got, []int{2817, 2854, 3120}) {
		t.Errorf("topPIDs = %v", got)
	}
	smaps := []byte(readTestdata(t, "smaps_rollup.txt"))
	prog, pss, ok := programPSS([]byte("/usr/local/bin/kube-apiserver\x00--advertise-address=172.31.250.10\x00"), smaps)
	if !ok || prog != "kube-apiserver" || pss != 541<<10 {
		t.Errorf("programPSS = %q, %d, %v; want kube-apiserver, %d (Pss, not Rss or Pss_Anon)", prog, pss, ok, 541<<10)
	}
	if prog, _, _ := programPSS([]byte("/bin/bash\x00"), smaps); prog != "other" {
		t.Errorf("bash counted as %q, want other", prog)
	}
	if _, _, ok := programPSS(nil, smaps); ok {
		t.Error("a kernel thread (empty cmdline) was counted")
	}
}

// TestMedians: the lines scripts and the README read carry each figure in
// its place: swapping two of them fails here.
func TestMedians(t *testing.T) {
	mk := func(up, api, start float64, mem int64) *run {
		r := &run{phases: map[string]float64{}}
		r.add("API server answering", api)
		r.add("up total", up)
		r.add("start: total", start)
		r.memory = []nodeMemory{{role: "control-plane", total: mem, programs: map[string]int64{"etcd": mem / 10}}}
		return r
	}
	results := map[int][]*run{
		1: {mk(24.0, 8.1, 5.0, 800<<20), mk(23.4, 8.3, 4.9, 813<<20), mk(22.9, 8.6, 4.7, 830<<20)},
		2: {mk(30.5, 9.7, 6.2, 700<<20), mk(29.8, 9.2, 6.4, 680<<20)},
	}
	var b bytes.Buffer
	printMedians(&b, []int{1, 2}, results)
	want := `up median: 1 node 23.4s, 2 nodes 30.1s
api median: 1 node 8.3s, 2 nodes 9.4s
node memory median: 813 MiB
start median: 1 node 4.9s, 2 nodes 6.3s
`
	if b.String() != want {
		t.Errorf("printMedians:\n%s\nwant\n%s", b.String(), want)
	}

	b.Reset()
	report(&b, 1, results[1])
	for _, line := range []string{
		"  API server answering                                         8.1      8.3      8.6",
		"  up total                                                    22.9     23.4     24.0",
		"    node (docker stats)                         813",
		"    etcd                                         81",
	} {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("report lacks the line %q:\n%s", line, b.String())
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
