//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/testing/dockerrelay"
)

// wineHost is hwk.exe, the windows/amd64 build, run under Wine 10
// (hack/wine.sh) in a Wine prefix of the test's own: C:\users\root is
// the Windows user's profile, with hwk's state under its
// AppData\Local and the kubeconfig at .kube\config. The Docker engine is
// this machine's, reached through a loopback TCP relay to its socket
// (DOCKER_HOST=tcp://127.0.0.1:PORT, as Docker Desktop's TCP option).
type wineHost struct {
	t      *testing.T
	script string // hack/wine.sh
	exe    string // hwk.exe
	prefix string
	// work is a directory bound into the root at its own path, for files
	// hwk.exe writes that the test reads (exported logs).
	work  string
	relay *dockerrelay.Relay
	// goWindows puts Go for Windows on hwk.exe's PATH (a source build).
	goWindows bool
	// engine is how hwk.exe reaches the engine: "" through the TCP relay
	// (DOCKER_HOST), "pipe" with no DOCKER_HOST under pipeRelay
	// (npiperelay.exe), which serves Docker Desktop's named pipe, "none"
	// with neither.
	engine    string
	pipeRelay string
}

func newWineHost(t *testing.T) *wineHost {
	t.Helper()
	if os.Getenv("HWK_E2E_WINE") != "1" {
		t.Skip("runs hwk.exe under Wine: set HWK_E2E_WINE=1 and HWK_EXE (make e2e-wine)")
	}
	exe, err := filepath.Abs(os.Getenv("HWK_EXE"))
	if err != nil || os.Getenv("HWK_EXE") == "" {
		t.Fatalf("HWK_EXE names no hwk.exe (make e2e-wine builds bin/windows-amd64/hwk.exe): %v", err)
	}
	script, err := filepath.Abs("../hack/wine.sh")
	if err != nil {
		t.Fatal(err)
	}
	relay, err := dockerrelay.Start()
	if err != nil || relay == nil {
		t.Fatalf("no Docker engine to relay to: %v", err)
	}
	t.Cleanup(func() { relay.Close() })
	// Under /var/tmp, not the test's /tmp: hack/wine.sh gives the root a
	// /tmp of its own.
	dir, err := os.MkdirTemp("/var/tmp", "hwk-e2e-wine-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("kept the Wine prefix and files in %s", dir)
		}
	})
	w := &wineHost{t: t, script: script, exe: exe, prefix: filepath.Join(dir, "prefix"), work: filepath.Join(dir, "work"), relay: relay}
	if err := os.MkdirAll(w.work, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(script, "prefix", w.prefix).CombinedOutput(); err != nil {
		t.Fatalf("make the Wine prefix: %v\n%s", err, out)
	}
	return w
}

// winPath is a host path as hwk.exe names it: Wine maps / to Z:\.
func winPath(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

// profile is a path under the Windows user's profile, C:\users\root.
func (w *wineHost) profile(elem ...string) string {
	return filepath.Join(append([]string{w.prefix, "drive_c", "users", "root"}, elem...)...)
}

// command is hwk.exe with args under Wine.
func (w *wineHost) command(args ...string) *exec.Cmd {
	run := []string{"run"}
	if w.goWindows {
		run = append(run, "-g")
	}
	run = append(run, "-b", w.prefix, "-b", filepath.Dir(w.exe), "-b", w.work, "wine")
	env := []string{"WINEPREFIX=" + w.prefix, "WINEDEBUG=-all"}
	switch w.engine {
	case "pipe":
		run = append(run, w.pipeRelay, "-to", strings.TrimPrefix(w.relay.Host(), "tcp://"), "--")
	case "":
		env = append(env, "DOCKER_HOST="+w.relay.Host())
	}
	run = append(run, w.exe)
	c := exec.Command(w.script, append(run, args...)...)
	// hwk.exe's own settings come from the Windows environment Wine
	// makes: none of the host's HWK_HOME, KUBECONFIG, XDG paths or
	// DOCKER_HOST.
	c.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "HWK_HOME=") || strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "XDG_") || strings.HasPrefix(kv, "DOCKER_")
	}), env...)
	return c
}

// hwk runs hwk.exe and returns its stdout and stderr and how long it took.
func (w *wineHost) hwk(args ...string) (string, string, time.Duration, error) {
	w.t.Helper()
	c := w.command(args...)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	start := time.Now()
	err := c.Run()
	took := time.Since(start)
	w.t.Logf("hwk.exe %s (exit %v, %s)\n%s%s", strings.Join(args, " "), err, took.Round(time.Millisecond), errOut.String(), out.String())
	return out.String(), errOut.String(), took, err
}

// files lists the files (not directories) under dir, relative to it.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// TestWindowsHostUnderWine: hwk.exe, the windows/amd64 build, makes a
// Linux-only cluster on the docker driver against this machine's engine,
// as on a Windows laptop with Docker Desktop: doctor first (with Wine's
// powershell.exe, a stub that never answers), then up, the kubeconfig it
// merges into C:\users\root\.kube\config read by the Linux kubectl,
// load-image of an image from the engine, stop and start, export logs,
// and down, after which neither the engine nor the Windows user's
// profile holds anything of the cluster, and the user's own kubeconfig
// entries are as they were.
func TestWindowsHostUnderWine(t *testing.T) {
	w := newWineHost(t)
	const name = "wine"
	cp, worker := name+"-cp", name+"-linux-1"
	kc := w.profile(".kube", "config")
	if err := os.MkdirAll(filepath.Dir(kc), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kc, []byte(userKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	before := files(t, w.profile("AppData"))
	t.Cleanup(func() {
		if t.Failed() {
			w.hwk("get", "nodes", "--name", name)
		}
		w.hwk("down", "--name", name)
	})

	if out, _, _, err := w.hwk("version"); err != nil || !strings.Contains(out, "windows/amd64") {
		t.Fatalf("hwk.exe version: %v\n%s", err, out)
	}

	t.Run("doctor", func(t *testing.T) {
		first, took, out := w.timedOutput("doctor", "--name", name, "--driver", "docker", "--windows-workers", "0")
		fmt.Printf("E2E WINE DOCTOR: first output after %s, done in %s\n", first.Round(10*time.Millisecond), took.Round(10*time.Millisecond))
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`(?m)^CHECK +STATUS +DETAIL$`),
			regexp.MustCompile(`(?m)^driver docker +ok +Docker Engine `),
			regexp.MustCompile(`(?m)^driver hyperv +skip +powershell.exe started but did not answer in 30s`),
			regexp.MustCompile(`(?m)^docker engine +ok +Docker `),
		} {
			if !want.MatchString(out) {
				t.Errorf("doctor's report has no line matching %s:\n%s", want, out)
			}
		}
	})

	stdout, _, took, err := w.hwk("up", "--name", name, "--driver", "docker", "--windows-workers", "0", "--linux-workers", "1")
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	m := regexp.MustCompile(`API server after (\S+), all nodes Ready after (\S+) \((\S+) in all\)`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("up did not report its times:\n%s", stdout)
	}
	fmt.Printf("E2E WINE UP: API server ready %s, all nodes Ready %s, up total %s (hwk.exe ran %s)\n", m[1], m[2], m[3], took.Round(100*time.Millisecond))

	// The kubeconfig hwk.exe merged, at the Windows default path, and the
	// one get kubeconfig prints: the same cluster, on the loopback port
	// the engine published.
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, ok := cfg.Contexts["hwk-"+name]
	if !ok || cfg.Contexts["mine"] == nil || cfg.AuthInfos["me"] == nil || cfg.AuthInfos["me"].Token != "secret" {
		t.Fatalf("C:\\users\\root\\.kube\\config: hwk's context %v, the user's kept: %v", ok, cfg.Contexts["mine"] != nil)
	}
	server := cfg.Clusters[ctx.Cluster].Server
	if !regexp.MustCompile(`^https://127\.0\.0\.1:\d+$`).MatchString(server) {
		t.Errorf("the API server in the kubeconfig is %q", server)
	}
	printed, _, _, err := w.hwk("get", "kubeconfig", "--name", name)
	if err != nil {
		t.Fatal(err)
	}
	if own, err := clientcmd.Load([]byte(printed)); err != nil || own.Clusters[own.Contexts[own.CurrentContext].Cluster].Server != server {
		t.Errorf("get kubeconfig: %v\n%s", err, printed)
	}
	// The cluster's state, in %LOCALAPPDATA%\hwk as on Windows: files
	// the check after down must find gone.
	if entries, err := os.ReadDir(w.profile("AppData", "Local", "hwk", "clusters", name)); err != nil || len(entries) == 0 {
		t.Errorf("the cluster's directory under %%LOCALAPPDATA%%\\hwk\\clusters: %v", err)
	}
	during := files(t, w.profile("AppData"))
	t.Logf("C:\\users\\root\\AppData with the cluster up: %d files, e.g. %q", len(during), during[:min(len(during), 5)])

	kubectl := copyKubectl(t, cp)
	nodesReady := func(when string) {
		t.Helper()
		out, err := exec.Command(kubectl, "--kubeconfig", kc, "--context", "hwk-"+name, "wait", "--for=condition=Ready", "node", "--all", "--timeout=180s").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl wait for the nodes Ready %s: %v\n%s", when, err, out)
		}
		out, err = exec.Command(kubectl, "--kubeconfig", kc, "--context", "hwk-"+name, "get", "nodes", "-o", "wide").CombinedOutput()
		t.Logf("kubectl get nodes %s (%v):\n%s", when, err, out)
		for _, n := range []string{cp, worker} {
			if !regexp.MustCompile(`(?m)^` + n + `\s+Ready\s`).Match(out) {
				t.Errorf("%s: node %s is not Ready:\n%s", when, n, out)
			}
		}
	}
	nodesReady("after up")

	buildProbe(t, probeImage)
	_, _, took, err = w.hwk("load-image", "--name", name, probeImage)
	if err != nil {
		t.Fatalf("load-image: %v", err)
	}
	fmt.Printf("E2E WINE LOAD-IMAGE: %s\n", took.Round(10*time.Millisecond))
	cs := client(t, kc, "hwk-"+name)
	pod := probePod("from-wine", worker, "check")
	if _, err := cs.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := waitPod(t, cs, "from-wine", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	}); p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("the pod of the image hwk.exe loaded: %s", p.Status.Phase)
	}

	_, _, stopTook, err := w.hwk("stop", "--name", name)
	if err != nil {
		t.Fatalf("stop: %v", err)
	}
	_, _, startTook, err := w.hwk("start", "--name", name)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	fmt.Printf("E2E WINE STOP START: stop %s, start %s\n", stopTook.Round(100*time.Millisecond), startTook.Round(100*time.Millisecond))
	nodesReady("after stop and start")

	out, _, _, err := w.hwk("export", "logs", winPath(w.work), "--name", name)
	if err != nil {
		t.Fatalf("export logs: %v", err)
	}
	archive := strings.TrimSpace(out)
	if !strings.HasPrefix(archive, winPath(w.work)+`\`) || !strings.HasSuffix(archive, ".tar.gz") {
		t.Fatalf("export logs printed %q, not an archive in %s", archive, winPath(w.work))
	}
	host := filepath.Join(w.work, filepath.Base(strings.ReplaceAll(archive, `\`, "/")))
	list := strings.Fields(string(mustOutput(t, "tar", "tzf", host)))
	if !slices.ContainsFunc(list, func(f string) bool { return strings.Contains(f, cp) }) {
		t.Errorf("the archive has nothing of %s: %v", cp, list)
	}
	t.Logf("export logs: %d files in %s", len(list), archive)

	if _, _, took, err = w.hwk("down", "--name", name); err != nil {
		t.Fatalf("down: %v", err)
	}
	fmt.Printf("E2E WINE DOWN: %s\n", took.Round(100*time.Millisecond))
	if l := leftovers(t, name); len(l) > 0 {
		t.Errorf("the engine still has %v", l)
	}
	cfg, err = clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Contexts["hwk-"+name]; ok || cfg.Contexts["mine"] == nil || cfg.AuthInfos["me"].Token != "secret" {
		t.Errorf("after down the kubeconfig has hwk's context %v, the user's %v", ok, cfg.Contexts["mine"] != nil)
	}
	after := files(t, w.profile("AppData"))
	var added []string
	for _, f := range after {
		if !slices.Contains(before, f) {
			added = append(added, f)
		}
	}
	t.Logf("C:\\users\\root\\AppData: %d files before, %d after", len(before), len(after))
	if len(added) > 0 {
		t.Errorf("down left these in C:\\users\\root\\AppData: %q", added)
	}
}

// timedOutput runs hwk.exe and returns how long it was before it
// printed anything (on stdout or stderr, as a terminal shows both), how
// long it ran, and everything it printed (stdout, then stderr).
func (w *wineHost) timedOutput(args ...string) (first, took time.Duration, out string) {
	w.t.Helper()
	c := w.command(args...)
	start := time.Now()
	var once sync.Once
	var stdout, stderr bytes.Buffer
	c.Stdout = firstWrite{&stdout, func() { once.Do(func() { first = time.Since(start) }) }}
	c.Stderr = firstWrite{&stderr, func() { once.Do(func() { first = time.Since(start) }) }}
	err := c.Run()
	took = time.Since(start)
	once.Do(func() { first = took })
	w.t.Logf("hwk.exe %s (exit %v, first output after %s, %s in all)\n%s%s", strings.Join(args, " "), err, first, took, stdout.String(), stderr.String())
	return first, took, stdout.String() + stderr.String()
}

// firstWrite is a writer that calls seen before each write.
type firstWrite struct {
	w    io.Writer
	seen func()
}

func (f firstWrite) Write(p []byte) (int, error) {
	f.seen()
	return f.w.Write(p)
}

// TestWindowsHostNamedPipe: with DOCKER_HOST unset, hwk.exe dials Docker
// Desktop's named pipe, \\.\pipe\docker_engine. With no engine there its
// drivers say so and how to fix it; with a pipe served (npiperelay, in
// the same Wine session, relaying to this machine's engine) the docker
// driver works through it: up of a one-node cluster, exec on the node
// (an attached stream over the pipe), down.
func TestWindowsHostNamedPipe(t *testing.T) {
	w := newWineHost(t)
	w.pipeRelay = filepath.Join(w.work, "npiperelay.exe")
	build := exec.Command("go", "build", "-o", w.pipeRelay, "../internal/testing/npiperelay")
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build npiperelay: %v\n%s", err, out)
	}
	docker := func(label string) drivers.Availability {
		t.Helper()
		out, _, _, err := w.hwk("get", "drivers", "-o", "json")
		if err != nil {
			t.Fatalf("get drivers %s: %v", label, err)
		}
		var av []drivers.Availability
		if err := json.Unmarshal([]byte(out), &av); err != nil {
			t.Fatalf("get drivers %s: %v\n%s", label, err, out)
		}
		for _, a := range av {
			if a.Name == "docker" {
				return a
			}
		}
		t.Fatalf("get drivers %s lists no docker driver:\n%s", label, out)
		return drivers.Availability{}
	}

	// No pipe: the error names the pipe and the fix.
	w.engine = "none"
	if a := docker("with no engine"); a.Available || !strings.Contains(a.Detail, "npipe:////./pipe/docker_engine") || !strings.Contains(a.Fix, "Docker Desktop") {
		t.Errorf("docker with no pipe: %+v", a)
	}

	w.engine = "pipe"
	if a := docker("through the pipe"); !a.Available || !strings.HasPrefix(a.Detail, "Docker Engine ") {
		t.Fatalf("docker through the pipe: %+v", a)
	}
	const name = "wine-pipe"
	t.Cleanup(func() { w.hwk("down", "--name", name) })
	if _, _, took, err := w.hwk("up", "--name", name, "--driver", "docker", "--windows-workers", "0", "--linux-workers", "0"); err != nil {
		t.Fatalf("up through the pipe: %v", err)
	} else {
		fmt.Printf("E2E WINE PIPE UP: %s\n", took.Round(100*time.Millisecond))
	}
	if out, _, _, err := w.hwk("exec", name+"-cp", "--name", name, "--", "hostname"); err != nil || strings.TrimSpace(out) != name+"-cp" {
		t.Errorf("exec through the pipe: %q, %v", out, err)
	}
	if _, _, _, err := w.hwk("down", "--name", name); err != nil {
		t.Fatalf("down through the pipe: %v", err)
	}
	if l := leftovers(t, name); len(l) > 0 {
		t.Errorf("the engine still has %v", l)
	}
}

// TestWindowsHostBuildsNodeImage: hwk.exe builds the Linux node image
// from source through the engine, as a Windows laptop with Docker
// Desktop does today (nothing is published): Go for Windows
// cross-compiles every component for linux/amd64, the Debian root is
// assembled on the Windows side and configured in a container, and the
// docker format goes into the engine. Then a cluster boots from that
// image. One part cannot run here: a Windows host takes runc (cgo) from
// its GitHub release, which this machine cannot reach, so the test puts
// the runc the Linux build compiled from the same version where the plan
// (--dry-run) says the download goes. The engine's hwk/node tag is put
// back as it was afterwards, so that the Linux build's cache stays
// valid.
func TestWindowsHostBuildsNodeImage(t *testing.T) {
	w := newWineHost(t)
	w.goWindows = true
	const version = "v1.35.4"
	ref := "hwk/node:" + version
	// The Linux build's image, kept under a tag of the test's and put
	// back at the end.
	saved := "hwk-e2e-wine/saved-node:" + version
	keyOf := func() string {
		return strings.TrimSpace(string(mustOutput(t, "docker", "image", "inspect", "-f", `{{index .Config.Labels "dev.hwk.node-image.key"}}`, ref)))
	}
	linuxKey := keyOf()
	docker(t, nil, "tag", ref, saved)
	t.Cleanup(func() {
		docker(t, nil, "tag", saved, ref)
		docker(t, nil, "rmi", saved)
	})

	plan, _, _, err := w.hwk("node-image", "build", "linux", "--source", "source", "--formats", "docker", "--dry-run")
	if err != nil {
		t.Fatalf("the plan: %v", err)
	}
	var runcDir string
	for _, l := range strings.Split(plan, "\n") {
		f := strings.Fields(l)
		if len(f) == 5 && f[0] == "runc" {
			if f[2] != "release" || f[3] != "no" {
				t.Fatalf("the plan for runc on Windows: %q (want its release, not cached)", l)
			}
			runcDir = f[4]
		}
	}
	if !strings.HasPrefix(runcDir, `C:\users\root\`) {
		t.Fatalf("no runc download in the plan:\n%s", plan)
	}
	host := filepath.Join(w.prefix, "drive_c", filepath.FromSlash(strings.ReplaceAll(strings.TrimPrefix(runcDir, `C:\`), `\`, "/")))
	// The Linux build's cache, as hwk on Linux finds it (state.DefaultDirs).
	linuxCache := os.Getenv("HWK_LINUX_CACHE")
	switch {
	case linuxCache != "":
	case os.Getenv("HWK_HOME") != "":
		linuxCache = filepath.Join(os.Getenv("HWK_HOME"), "cache")
	case os.Getenv("XDG_CACHE_HOME") != "":
		linuxCache = filepath.Join(os.Getenv("XDG_CACHE_HOME"), "hwk")
	default:
		linuxCache = filepath.Join(os.Getenv("HOME"), ".cache", "hwk")
	}
	built, _ := filepath.Glob(filepath.Join(linuxCache, "build", "runc-*", "runc"))
	if len(built) == 0 {
		t.Fatalf("no runc in the Linux build's cache %s (make node-image first)", linuxCache)
	}
	if err := os.MkdirAll(host, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(built[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "runc"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, ".done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	out, stderr, took, err := w.hwk("node-image", "build", "linux", "--source", "source", "--formats", "docker")
	if err != nil {
		t.Fatalf("hwk.exe node-image build linux: %v", err)
	}
	fmt.Printf("E2E WINE NODE IMAGE: built by hwk.exe in %s\n", took.Round(time.Second))
	for _, step := range []string{"Build kubernetes " + version, "Download runc v1.4.2", "(cached)", "Configure the node's root in Docker (stage 2)"} {
		if !strings.Contains(stderr, step) {
			t.Errorf("the build did not say %q", step)
		}
	}
	m := regexp.MustCompile(`Node image (\S+) ready`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the build named no image:\n%s", out)
	}
	// runc comes from another source, so the image is not the Linux
	// build's: another key.
	if key := keyOf(); key == linuxKey || key == "" {
		t.Errorf("the engine's %s has key %q, the Linux build's is %q", ref, key, linuxKey)
	}
	list, _, _, err := w.hwk("node-image", "list")
	if err != nil || !strings.Contains(list, m[1]) {
		t.Errorf("node-image list does not show %s: %v\n%s", m[1], err, list)
	}

	const name = "wine-built"
	t.Cleanup(func() { w.hwk("down", "--name", name) })
	up, _, took, err := w.hwk("up", "--name", name, "--driver", "docker", "--windows-workers", "0", "--linux-workers", "0", "--pull", "never")
	if err != nil {
		t.Fatalf("up from the image hwk.exe built: %v", err)
	}
	fmt.Printf("E2E WINE BUILT UP: %s\n", took.Round(100*time.Millisecond))
	if !strings.Contains(up, "is ready") {
		t.Errorf("up:\n%s", up)
	}
	kubectl := copyKubectl(t, name+"-cp")
	nodes, err := exec.Command(kubectl, "--kubeconfig", w.profile(".kube", "config"), "--context", "hwk-"+name, "get", "nodes", "--no-headers").CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^`+name+`-cp\s+Ready\s`).Match(nodes) {
		t.Errorf("kubectl get nodes: %v\n%s", err, nodes)
	}
	if _, _, _, err := w.hwk("down", "--name", name); err != nil {
		t.Fatalf("down: %v", err)
	}
}
