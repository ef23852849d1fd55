// Command benchload measures loads of a large image into a node by `hwk
// load-image` and by `kind load docker-image`, on the same node, in
// alternating rounds, and prints medians and ratios of two kinds:
//
//   - first loads: before every load the image is removed from the node
//     (ctr images rm --sync), so each round is a first load;
//   - rebuilds, a developer's inner loop: the image rebuilt with a new top
//     layer of a few MiB each round, loaded into a node that holds the
//     image it was built on (and not the rebuilt one: each load of a
//     round finds the node as the last build left it), once with a warm
//     page cache (a docker save read through just before, as the loop's
//     last build and load leave it) and once cold.
//
// The node is a one-node hwk cluster on the docker driver whose container
// also carries kind's labels, so kind finds it as the only node of a kind
// cluster of the same name.
//
// Run it with `make bench-load`, which builds hwk and installs a pinned
// kind first.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/docker"
	"github.com/hwk-dev/hwk/internal/kubeconfig"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster"
)

const (
	clusterName = "hwkbench"
	image       = "hwk-bench/load:1"
	// rebuilt is image with one layer more, rebuilt every round.
	rebuilt = "hwk-bench/load:rebuilt"
)

func main() {
	hwkBin := flag.String("hwk", "bin/hwk", "hwk binary")
	kindBin := flag.String("kind", "", "kind binary (required)")
	rounds := flag.Int("rounds", 3, "rounds; each loads the image once with each tool")
	randomMB := flag.Int("random-mb", 256, "MiB of random data in the image's second layer")
	topMB := flag.Int("top-mb", 4, "MiB of random data in the rebuilt image's top layer")
	tree := flag.String("tree", "/usr/local/go", "a directory tree for the image's first layer (many small files)")
	keep := flag.Bool("keep", false, "keep the cluster and the image afterwards")
	flag.Parse()
	if *kindBin == "" {
		fail(fmt.Errorf("-kind is required"))
	}
	if err := run(*hwkBin, *kindBin, *rounds, *randomMB, *topMB, *tree, *keep); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchload:", err)
	os.Exit(1)
}

func run(hwkBin, kindBin string, rounds, randomMB, topMB int, tree string, keep bool) error {
	ctx := context.Background()
	home, err := os.MkdirTemp("", "hwk-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	hwkBin, err = filepath.Abs(hwkBin)
	if err != nil {
		return err
	}
	dirs := state.Dirs{Config: filepath.Join(home, "config"), Data: filepath.Join(home, "data"), Cache: filepath.Join(home, "cache")}
	p := &cluster.Provider{
		Registry: drivers.NewRegistry(docker.New().WithLabels(map[string]string{
			"io.x-k8s.kind.cluster": clusterName,
			"io.x-k8s.kind.role":    "control-plane",
		})),
		Dirs:            dirs,
		KubeconfigPaths: kubeconfig.Paths{Explicit: filepath.Join(home, "kubeconfig")},
	}

	fmt.Printf("building %s (a %s tree and %d MiB of random data) ...\n", image, tree, randomMB)
	if err := buildImage(tree, randomMB); err != nil {
		return err
	}
	if !keep {
		defer exec.Command("docker", "rmi", "-f", image).Run()
	}
	size, id, err := imageSize()
	if err != nil {
		return err
	}
	engine, _ := exec.Command("docker", "version", "-f", "Docker Engine {{.Server.Version}} (API {{.Server.APIVersion}})").Output()
	store, _ := exec.Command("docker", "info", "-f", "{{.Driver}} {{.DriverStatus}}").Output()
	kindVersion, _ := exec.Command(kindBin, "version").Output()
	fmt.Printf("%s, storage %s; %s", strings.TrimSpace(string(engine)), strings.TrimSpace(string(store)), kindVersion)

	fmt.Printf("making a one-node cluster %s on the docker driver ...\n", clusterName)
	cfg := &config.Cluster{Name: clusterName, Nodes: []config.Node{{Role: config.ControlPlane, OS: config.Linux, Driver: config.DriverDocker}}}
	config.SetDefaults(cfg, config.Host{OS: "linux", Drivers: map[config.OS]string{config.Linux: config.DriverDocker}})
	if err := config.Validate(cfg); err != nil {
		return err
	}
	if !keep {
		defer func() { _, _ = p.Down(context.WithoutCancel(ctx), clusterName) }()
	}
	if _, err := p.Up(ctx, cfg, cluster.UpOptions{}); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	node := cfg.Nodes[0].Name

	// kind execs into nodes with `docker exec --privileged`, which an
	// engine without every capability refuses ("unable to apply caps").
	// Where it does, a docker shim drops that one flag; kind's own work
	// (save to a file, stream it into ctr) is unchanged.
	kindEnv, shim, err := kindEnvironment(node)
	if err != nil {
		return err
	}
	if shim {
		fmt.Println("note: this engine refuses `docker exec --privileged`; kind runs through a docker shim that drops the flag")
	}
	hwkEnv := append(os.Environ(), "HWK_HOME="+home)

	toolsFor := func(ref string) []tool {
		return []tool{
			{name: "hwk load-image", cmd: func() *exec.Cmd {
				c := exec.Command(hwkBin, "load-image", ref, "--name", clusterName, "-q")
				c.Env = hwkEnv
				return c
			}},
			{name: "kind load docker-image", cmd: func() *exec.Cmd {
				c := exec.Command(kindBin, "load", "docker-image", ref, "--name", clusterName)
				c.Env = kindEnv
				return c
			}},
		}
	}
	tools := toolsFor(image)
	fmt.Printf("image %s: %s as docker save writes it; %d rounds, first loads only\n", image, mib(size), rounds)
	if dropCaches {
		fmt.Println("before each load: the image is removed from the node, dirty pages are written back and the page cache is dropped")
	} else {
		fmt.Println("before each load: the image is removed from the node and dirty pages are written back (not root: the page cache stays)")
	}
	var times [2][]time.Duration // [hwk|kind]
	for r := 0; r < rounds; r++ {
		order := []int{0, 1}
		if r%2 == 1 {
			order = []int{1, 0}
		}
		var line []string
		for _, i := range order {
			if err := removeImage(node, id); err != nil {
				return err
			}
			t := tools[i]
			took, err := t.time(func() error { return checkLoaded(node, id) })
			if err != nil {
				return err
			}
			times[i] = append(times[i], took)
			line = append(line, fmt.Sprintf("%s %s (%s/s)", t.name, took.Round(10*time.Millisecond), mib(rate(size, took))))
		}
		fmt.Printf("round %d: %s\n", r+1, strings.Join(line, ", "))
	}
	firstRatio := printFirstLoads(os.Stdout, size, times)

	// Rebuilds: the node holds image (loaded once more here), and each
	// round builds rebuilt anew on it and loads it with each tool.
	if err := removeImage(node, id); err != nil {
		return err
	}
	if out, err := tools[0].cmd().CombinedOutput(); err != nil {
		return fmt.Errorf("load %s for the rebuilds: %w\n%s", image, err, out)
	}
	if !keep {
		defer exec.Command("docker", "rmi", "-f", rebuilt).Run()
	}
	fmt.Printf("rebuilds: %s with a new %d MiB top layer each round, into a node that holds %s\n", rebuilt, topMB, image)
	fmt.Println("  warm: the page cache holds the image, as the inner loop's last load and build leave it (a docker save is read through before each load)")
	fmt.Println("  cold: the page cache is dropped before each load, as after a reboot")
	rtools := toolsFor(rebuilt)
	const warm, cold = 0, 1
	var rtimes [2][2][]time.Duration // [warm|cold][tool]
	// saves are docker saves of the rebuilt image alone, each right after
	// the page cache was dropped: the first of each round, and those
	// that warm the cache before the warm loads.
	var saves []time.Duration
	var rsize int64
	for r := 0; r < rounds; r++ {
		rid, err := buildRebuilt(topMB)
		if err != nil {
			return err
		}
		if rsize, saves, err = timeSave(rebuilt, saves); err != nil {
			return err
		}
		order := []int{0, 1}
		if r%2 == 1 {
			order = []int{1, 0}
		}
		var line []string
		for _, cache := range []int{warm, cold} {
			for _, i := range order {
				if err := removeRef(node, rebuilt, rid); err != nil {
					return err
				}
				if cache == warm {
					// removeRef dropped the cache: this read starts cold.
					if _, saves, err = readSave(rebuilt, saves); err != nil {
						return err
					}
				}
				t := rtools[i]
				took, err := t.time(func() error { return checkRef(node, rebuilt, rid) })
				if err != nil {
					return err
				}
				rtimes[cache][i] = append(rtimes[cache][i], took)
				line = append(line, fmt.Sprintf("%s %s %s", []string{"warm", "cold"}[cache], t.name, took.Round(10*time.Millisecond)))
			}
		}
		fmt.Printf("rebuild %d: %s\n", r+1, strings.Join(line, ", "))
	}
	printRebuilds(os.Stdout, rtimes, rsize, saves, firstRatio)
	return nil
}

// printFirstLoads prints the first loads' medians (times[0] hwk's, times[1]
// kind's) and rates for an image of size bytes, and returns kind's median
// over hwk's.
func printFirstLoads(w io.Writer, size int64, times [2][]time.Duration) float64 {
	mh, mk := median(times[0]), median(times[1])
	fmt.Fprintf(w, "median: hwk load-image %s (%s/s), kind load docker-image %s (%s/s)\n",
		mh.Round(10*time.Millisecond), mib(rate(size, mh)), mk.Round(10*time.Millisecond), mib(rate(size, mk)))
	return mk.Seconds() / mh.Seconds()
}

// printRebuilds prints the rebuilds' medians (rtimes[warm|cold][hwk|kind]),
// the rebuilt image's size and docker save's own time, and the ratios
// the README quotes, kind's time over hwk's: first loads, warm and cold
// rebuilds.
func printRebuilds(w io.Writer, rtimes [2][2][]time.Duration, rsize int64, saves []time.Duration, firstRatio float64) {
	const warm, cold = 0, 1
	for _, cache := range []int{warm, cold} {
		fmt.Fprintf(w, "median rebuild, %s: hwk load-image %s, kind load docker-image %s\n", []string{"warm", "cold"}[cache],
			median(rtimes[cache][0]).Round(10*time.Millisecond), median(rtimes[cache][1]).Round(10*time.Millisecond))
	}
	fmt.Fprintf(w, "the rebuilt image is %s as docker save writes it; docker save alone, from a cold page cache: median %s of %d\n",
		mib(rsize), median(saves).Round(10*time.Millisecond), len(saves))
	fmt.Fprintf(w, "first-load ratio: %.2f\n", firstRatio)
	fmt.Fprintf(w, "rebuild ratio: %.2f\n", median(rtimes[warm][1]).Seconds()/median(rtimes[warm][0]).Seconds())
	fmt.Fprintf(w, "cold rebuild ratio: %.2f\n", median(rtimes[cold][1]).Seconds()/median(rtimes[cold][0]).Seconds())
}

// buildRebuilt builds rebuilt on image with a new top layer of topMB MiB
// of random data, and returns its ID.
func buildRebuilt(topMB int) (string, error) {
	dir, err := os.MkdirTemp("", "hwk-bench-rebuilt-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(filepath.Join(dir, "app.bin"))
	if err != nil {
		return "", err
	}
	if _, err := io.CopyN(f, rand.Reader, int64(topMB)<<20); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+image+"\nCOPY app.bin /app/app.bin\n"), 0o644); err != nil {
		return "", err
	}
	if out, err := exec.Command("docker", "build", "-q", "-t", rebuilt, dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("docker build: %v\n%s", err, out)
	}
	out, err := exec.Command("docker", "image", "inspect", "-f", "{{.ID}}", rebuilt).Output()
	return strings.TrimSpace(string(out)), err
}

// timeSave times a docker save of ref to nowhere from a cold page cache.
// It returns the archive's size and saves with this one's time added.
func timeSave(ref string, saves []time.Duration) (int64, []time.Duration, error) {
	settle()
	return readSave(ref, saves)
}

// readSave times a docker save of ref to nowhere as the cache stands.
func readSave(ref string, saves []time.Duration) (int64, []time.Duration, error) {
	start := time.Now()
	save := exec.Command("docker", "save", ref)
	r, err := save.StdoutPipe()
	if err != nil {
		return 0, saves, err
	}
	if err := save.Start(); err != nil {
		return 0, saves, err
	}
	n, err := io.Copy(io.Discard, r)
	if err != nil {
		return 0, saves, err
	}
	if err := save.Wait(); err != nil {
		return 0, saves, err
	}
	return n, append(saves, time.Since(start)), nil
}

// removeRef takes ref (by name and ID) off the node and nothing else:
// the image it was built on stays, with its layers.
func removeRef(node, ref, id string) error {
	if err := drop(node, ref, id); err != nil {
		return err
	}
	if err := checkLoaded(node, mustID(image)); err != nil {
		return fmt.Errorf("the base went with %s: %w", ref, err)
	}
	settle()
	return nil
}

// drop removes ref from the node under every name it has there: its own,
// the engine's ID, the CRI's (the config digest, which is not the
// engine's ID in the containerd store) and the import-DATE@DIGEST names
// `ctr import --digests` gives what kind loads; then its content is
// collected, which drop checks.
func drop(node, ref, id string) error {
	cri, _ := exec.Command("docker", "exec", node, "crictl", "inspecti", "-o", "go-template", "--template", "{{.status.id}}", "docker.io/"+ref).Output()
	names := []string{"docker.io/" + ref, id}
	if c := strings.TrimSpace(string(cri)); c != "" {
		names = append(names, c)
	}
	out, err := exec.Command("docker", "exec", node, "sh", "-c",
		"ls=$(ctr -n k8s.io images ls -q) && { echo \"$ls\" | grep '^import-'; echo \"$ls\" | grep -F -x -e '"+strings.Join(names, "' -e '")+"'; } | xargs -r ctr -n k8s.io images rm --sync").CombinedOutput()
	if err != nil {
		return fmt.Errorf("remove %s from %s: %v\n%s", ref, node, err, out)
	}
	if out, err := exec.Command("docker", "exec", node, "crictl", "inspecti", "-q", "docker.io/"+ref).CombinedOutput(); err == nil && len(bytes.TrimSpace(out)) > 0 {
		return fmt.Errorf("%s is still on %s after removal", ref, node)
	}
	content, err := exec.Command("docker", "exec", node, "ctr", "-n", "k8s.io", "content", "ls", "-q").Output()
	if err != nil {
		return fmt.Errorf("list %s's content: %w", node, err)
	}
	for _, d := range names[1:] {
		if bytes.Contains(content, []byte(d)) {
			return fmt.Errorf("%s still holds %s (named %v) after removal", node, d, names)
		}
	}
	return nil
}

func mustID(ref string) string {
	out, _ := exec.Command("docker", "image", "inspect", "-f", "{{.ID}}", ref).Output()
	return strings.TrimSpace(string(out))
}

// checkRef proves a load of ref happened: the kubelet's CRI sees it under
// its name, as the engine's image ID. That ID is the config digest in the
// classic store, which is the CRI's image ID, and the index or manifest
// digest in the containerd store, which is the target of the node's
// containerd image.
func checkRef(node, ref, id string) error {
	out, err := exec.Command("docker", "exec", node, "crictl", "inspecti", "-o", "go-template", "--template", "{{.status.id}}", "docker.io/"+ref).CombinedOutput()
	if err != nil {
		return fmt.Errorf("the node's CRI does not hold %s: %v\n%s", ref, err, out)
	}
	if strings.TrimSpace(string(out)) == id {
		return nil
	}
	target, err := exec.Command("docker", "exec", node, "ctr", "-n", "k8s.io", "images", "ls", "name==docker.io/"+ref).CombinedOutput()
	if err != nil {
		return fmt.Errorf("the node's containerd: %v\n%s", err, target)
	}
	if !bytes.Contains(target, []byte(id)) {
		return fmt.Errorf("the node holds %s as %s, not as %s\n%s", ref, strings.TrimSpace(string(out)), id, target)
	}
	return nil
}

type tool struct {
	name string
	cmd  func() *exec.Cmd
}

// time runs the tool once and, once it has ended, check, which proves the
// load happened; it returns how long the tool took.
func (t tool) time(check func() error) (time.Duration, error) {
	start := time.Now()
	out, err := t.cmd().CombinedOutput()
	took := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s: %w\n%s", t.name, err, out)
	}
	if err := check(); err != nil {
		return 0, fmt.Errorf("after %s: %w", t.name, err)
	}
	return took, nil
}

// buildImage makes image: one layer of a real tree (many small files, as
// an application's dependencies are), one of incompressible data.
func buildImage(tree string, randomMB int) error {
	dir, err := os.MkdirTemp("", "hwk-bench-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if out, err := exec.Command("cp", "-a", tree, filepath.Join(dir, "tree")).CombinedOutput(); err != nil {
		return fmt.Errorf("copy %s: %v\n%s", tree, err, out)
	}
	f, err := os.Create(filepath.Join(dir, "random.bin"))
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, rand.Reader, int64(randomMB)<<20); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	df := "FROM scratch\nCOPY tree /tree\nCOPY random.bin /data/random.bin\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err
	}
	if out, err := exec.Command("docker", "build", "-q", "-t", image, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("docker build: %v\n%s", err, out)
	}
	return nil
}

// imageSize is the size of the image's docker save archive, and its ID.
func imageSize() (int64, string, error) {
	out, err := exec.Command("docker", "image", "inspect", "-f", "{{.ID}}", image).Output()
	if err != nil {
		return 0, "", fmt.Errorf("inspect %s: %w", image, err)
	}
	id := strings.TrimSpace(string(out))
	save := exec.Command("docker", "save", image)
	r, err := save.StdoutPipe()
	if err != nil {
		return 0, "", err
	}
	if err := save.Start(); err != nil {
		return 0, "", err
	}
	n, err := io.Copy(io.Discard, r)
	if err != nil {
		return 0, "", err
	}
	return n, id, save.Wait()
}

// removeImage takes the image off the node, content and unpacked layers
// too, so the next load is a first one.
func removeImage(node, id string) error {
	if err := drop(node, image, id); err != nil {
		return err
	}
	settle()
	return nil
}

// settle writes back what the last round left dirty and, where this
// process may, empties the page cache, so that no round inherits another's
// writeback or warm cache.
func settle() {
	_ = exec.Command("sync").Run()
	if dropCaches {
		_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o644)
	}
}

// dropCaches is set when this process may drop the page cache.
var dropCaches = func() bool {
	f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}()

// checkLoaded proves a load of image happened (see checkRef).
func checkLoaded(node, id string) error { return checkRef(node, image, id) }

// kindEnvironment is kind's environment: a PATH whose docker drops
// `exec --privileged` when the engine refuses it.
func kindEnvironment(node string) ([]string, bool, error) {
	if exec.Command("docker", "exec", "--privileged", node, "true").Run() == nil {
		return os.Environ(), false, nil
	}
	real, err := exec.LookPath("docker")
	if err != nil {
		return nil, false, err
	}
	dir, err := os.MkdirTemp("", "hwk-bench-shim-")
	if err != nil {
		return nil, false, err
	}
	shim := fmt.Sprintf(`#!/bin/sh
# docker, minus "exec --privileged", which this engine refuses.
if [ "$1" = exec ]; then
	shift
	for a in "$@"; do
		shift
		[ "$a" = --privileged ] || set -- "$@" "$a"
	done
	exec %q exec "$@"
fi
exec %q "$@"
`, real, real)
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(shim), 0o755); err != nil {
		return nil, false, err
	}
	env := []string{}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "PATH=") {
			env = append(env, e)
		}
	}
	env = append(env, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return env, true, nil
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func rate(bytes int64, d time.Duration) int64 { return int64(float64(bytes) / d.Seconds()) }

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
