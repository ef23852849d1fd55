package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// TestHostileInput checks that the real hwk binary fails with a clear
// error, exits non-zero, changes nothing snapshot sees and only reads from
// the Docker engine, for every argument that takes a cluster name, a node
// name, a path or an image reference set to something hostile.
func TestHostileInput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it a few hundred times")
	}
	bin := buildHwk(t)
	f := newHostileFixture(t, bin)
	// Why a proxy that fails any request except a read, rather than a
	// snapshot of the whole engine: other packages' tests change the
	// engine's other objects while this one runs.
	dockerLog := f.dockerProxy(t)

	// Something hostile: a path traversal, an absolute path, a separator,
	// empty, over-long, non-ASCII, option-like, or the name of something
	// that exists but is not hwk's.
	for _, tc := range hostileCases(f) {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			before := f.snapshot(t)
			out, code := f.run(t, tc.args...)
			after := f.snapshot(t)
			if code == 0 {
				t.Errorf("exit status 0; want non-zero\n%s", out)
			}
			if !strings.Contains(out, "ERROR") || !containsAny(out, tc.want) || (tc.rule != nil && !containsAny(out, tc.rule)) {
				t.Errorf("the error should say one of %q (and of %q); it said:\n%s", tc.want, tc.rule, out)
			}
			if diff := diffSnapshots(before, after); diff != "" {
				t.Errorf("the command changed files:\n%s\noutput:\n%s", diff, out)
			}
		})
	}
	if writes := dockerLog.writes(); len(writes) > 0 {
		t.Errorf("hwk sent the Docker engine requests that change it: %q", writes)
	}
	t.Logf("Docker engine requests seen (reads only): %d", dockerLog.count())
}

type hostileCase struct {
	args []string
	// want: the error holds at least one of these; and, when rule is set,
	// one of rule's too.
	want, rule []string
}

// nameRule is the rule as config.CheckName words it.
var nameRule = []string{"not a valid cluster name; use lowercase letters, digits and '-'", "use at most 32", "the cluster name is empty", "is a device name on Windows"}

// optionLike is cobra's word for a positional argument that looks like a
// flag: it is refused as one.
const optionLike = "unknown shorthand flag"

// hostileNames returns names that break the name rule.
func hostileNames(f *hostileFixture) []string {
	return []string{
		"../../x", "../../../victim", f.victim, "a/b", `a\b`, "C:\\x", ".", "..", "",
		strings.Repeat("a", 33), strings.Repeat("b", 4096), "clüster", "Real", "-rf", "--help=x", " real", "real\n", "real\t",
		// Names Windows keeps for devices: no directory may have them.
		"con", "nul", "aux", "prn", "com1", "lpt9",
	}
}

// notOurs are the entries, where a cluster's directory would be, that hwk
// did not make: a directory without hwk's marker, a link out of hwk's
// directory, and a file.
var notOurs = []string{"notours", "linked", "afile"}

func hostileCases(f *hostileFixture) []hostileCase {
	// Every command that takes --name, with the arguments that let it
	// get past cobra's own checks.
	nameCommands := [][]string{
		{"up", "--windows-workers", "0", "--driver", "docker"}, {"down"}, {"stop"}, {"start"}, {"status"},
		{"exec", "cp", "--name", "%s", "--", "true"}, {"ssh", "cp"}, {"export", "logs", f.outside}, {"get", "nodes"}, {"get", "kubeconfig"},
		{"load-image", "--archive", f.victimFile}, {"doctor"}, {"config", "validate"},
	}
	withName := func(c []string, n string) []string {
		if i := slices.Index(c, "%s"); i >= 0 {
			c = slices.Clone(c)
			c[i] = n
			return c
		}
		return append(slices.Clone(c), "--name", n)
	}
	var cases []hostileCase
	for _, c := range nameCommands {
		for _, n := range hostileNames(f) {
			cases = append(cases, hostileCase{args: withName(c, n), want: []string{"--name: "}, rule: nameRule})
		}
	}
	// Names that pass the rule but are not hwk's clusters: each is
	// refused for what it is, and a link is never followed.
	for _, c := range nameCommands[1:11] {
		for _, n := range notOurs {
			cases = append(cases, hostileCase{args: withName(c, n), want: []string{"no cluster named " + n, "hwk leaves it alone"}})
		}
	}
	// Node names, image references, node lists and files on a cluster
	// that exists.
	for _, n := range []string{"../../x", "/etc", "-rf", "", "cp/../../x"} {
		cases = append(cases, hostileCase{args: []string{"exec", n, "--name", "real", "--", "true"}, want: []string{"has no node", optionLike, "give a node"}})
		if n != "" { // --nodes "" is every node, as no --nodes is
			cases = append(cases, hostileCase{args: []string{"load-image", "--name", "real", "--nodes", n, "--archive", f.victimFile}, want: []string{"has no node"}})
		}
	}
	for _, ref := range []string{"../../x", "-rf", "x/UPPER", "a b", "x@sha256:zz", strings.Repeat("r", 4096)} {
		cases = append(cases,
			hostileCase{args: []string{"load-image", "--name", "real", ref}, want: []string{"is not an image reference", optionLike}},
			hostileCase{args: []string{"node-image", "pull", ref}, want: []string{"reference", "version", "format", "no tag or digest", optionLike}},
			hostileCase{args: []string{"node-image", "push", ref}, want: []string{"reference", "format", "no tag or digest", optionLike}},
			hostileCase{args: []string{"node-image", "save", "-o", filepath.Join(f.outside, "out.tar"), ref}, want: []string{"no node image", "not a node image name", optionLike}},
			hostileCase{args: []string{"config", "validate", "--image", ref}, want: []string{"image:"}},
		)
	}
	// Files that are not what the argument wants: each is read, never
	// written or deleted.
	for _, p := range []string{f.victimFile, f.victim, filepath.Join(f.victim, "missing"), "../../victim", "-rf"} {
		cases = append(cases,
			hostileCase{args: []string{"load-image", "--name", "real", "--archive", p}, want: []string{p, "archive"}},
			hostileCase{args: []string{"node-image", "load", "-i", p}, want: []string{p, "archive"}},
			hostileCase{args: []string{"config", "validate", "--config", p}, want: []string{"config", "YAML", "apiVersion"}},
			hostileCase{args: []string{"doctor", "--config", p}, want: []string{"config", "YAML", "apiVersion"}},
			hostileCase{args: []string{"up", "--config", p}, want: []string{"config", "YAML", "apiVersion"}},
			hostileCase{args: []string{"node-image", "build", "windows", "--iso", p}, want: []string{"iso", "ISO", "openssh"}},
		)
	}
	for _, v := range []string{"../../x", "v1.35.4/../../x", "-rf"} {
		cases = append(cases, hostileCase{args: []string{"node-image", "build", "linux", "--source", "source", "--kubernetes-version", v}, want: []string{"Kubernetes", "version"}})
	}
	return cases
}

// hostileFixture is a root with hwk's home in it and, beside it, what a
// traversal would reach: victim/ (outside hwk's home) and home/x.
type hostileFixture struct {
	bin, root, home, victim, victimFile, outside, kubeconfig string
	env                                                      []string
	// engine reaches the Docker engine directly (nil: none here).
	engine *http.Client
	// objects names the network and volume of cluster real the fixture
	// made in the engine.
	objects string
}

func (f *hostileFixture) engineDo(t *testing.T, method, path, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, "http://docker"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.engine.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %s %v: %s", method, path, resp.Status, err, b)
	}
	return b
}

func (f *hostileFixture) engineGet(t *testing.T, path string) []byte {
	return f.engineDo(t, http.MethodGet, path, "")
}

func newHostileFixture(t *testing.T, bin string) *hostileFixture {
	root := t.TempDir()
	f := &hostileFixture{
		bin:        bin,
		root:       root,
		home:       filepath.Join(root, "home"),
		victim:     filepath.Join(root, "victim"),
		outside:    filepath.Join(root, "out"),
		kubeconfig: filepath.Join(root, "kube", "config"),
	}
	f.victimFile = filepath.Join(f.victim, "precious.txt")
	f.env = append(cleanEnv(), "HWK_HOME="+f.home, "KUBECONFIG="+f.kubeconfig, "HOME="+filepath.Join(root, "userhome"))
	for _, d := range []string{f.victim, f.outside, filepath.Join(f.home, "x"), filepath.Join(root, "userhome"), filepath.Dir(f.kubeconfig)} {
		must(t, os.MkdirAll(d, 0o700))
	}
	must(t, os.WriteFile(f.victimFile, []byte("not hwk's\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(f.home, "x", "keep"), []byte("not a cluster\n"), 0o600))

	// A real cluster's directory, as up leaves it (record, marker,
	// kubeconfig), and its context in the user's kubeconfig.
	rec, code := f.run(t, "config", "validate", "--name", "real", "--driver", "docker", "--windows-workers", "0")
	if code != 0 {
		t.Fatalf("config validate: %s", rec)
	}
	clusters := filepath.Join(f.home, "data", "clusters")
	real := filepath.Join(clusters, "real")
	must(t, os.MkdirAll(real, 0o700))
	must(t, os.WriteFile(filepath.Join(real, "cluster.yaml"), []byte(stdoutOnly(rec)), 0o600))
	must(t, os.WriteFile(filepath.Join(real, ".hwk-cluster"), []byte("real\n"), 0o600))
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: hwk-real\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: hwk-real\n  context:\n    cluster: hwk-real\n    user: hwk-real\nusers:\n- name: hwk-real\n  user:\n    token: t\ncurrent-context: hwk-real\n"
	must(t, os.WriteFile(filepath.Join(real, "kubeconfig"), []byte(kc), 0o600))
	must(t, os.WriteFile(f.kubeconfig, []byte(kc), 0o600))
	// What is not hwk's: a directory without the marker, holding a
	// record-like file, a link to victim/, and a file.
	must(t, os.MkdirAll(filepath.Join(clusters, "notours"), 0o700))
	must(t, os.WriteFile(filepath.Join(clusters, "notours", "data"), []byte("someone's\n"), 0o600))
	must(t, link(f.victim, filepath.Join(clusters, "linked")))
	must(t, os.WriteFile(filepath.Join(f.victim, "cluster.yaml"), []byte(strings.Replace(stdoutOnly(rec), "name: real", "name: linked", 1)), 0o600))
	must(t, os.WriteFile(filepath.Join(clusters, "afile"), []byte("a file\n"), 0o600))
	// The lock file any earlier command on real left (hwk keeps a
	// cluster's while the cluster exists).
	must(t, os.MkdirAll(filepath.Join(f.home, "data", "locks"), 0o700))
	must(t, os.WriteFile(filepath.Join(f.home, "data", "locks", "real.lock"), nil, 0o600))
	return f
}

// stdoutOnly drops the log lines config validate may print before the
// YAML (they go to stderr, which run merges).
func stdoutOnly(s string) string {
	if i := strings.Index(s, "apiVersion:"); i >= 0 {
		return s[i:]
	}
	return s
}

// cleanEnv returns the environment without what would point hwk at the
// user's own clusters, kubeconfig or Docker engine.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "KUBECONFIG" || k == "DOCKER_HOST" || k == "DOCKER_CONTEXT" || strings.HasPrefix(k, "XDG_") || strings.HasPrefix(k, "HWK_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func (f *hostileFixture) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.bin, args...)
	cmd.Env = f.env
	cmd.Dir = f.outside
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("hwk %q did not finish in 2 minutes:\n%s", args, out)
	}
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("run hwk: %v", err)
		}
		code = ee.ExitCode()
	}
	return string(out), code
}

// snapshot returns every entry under the fixture's root (hwk's home, victim/,
// out/, the kubeconfig): its kind, mode, size, link target and content;
// and the Docker engine's containers, networks and volumes of the
// fixture's cluster (the test makes a network and a volume labelled as
// hwk's for cluster real, as up would).
func (f *hostileFixture) snapshot(t *testing.T) map[string]string {
	t.Helper()
	snap := map[string]string{}
	if f.engine != nil {
		for _, what := range []string{"containers/json?all=1&", "networks?", "volumes?"} {
			b := f.engineGet(t, "/"+what+"filters="+url.QueryEscape(`{"label":["hwk.dev/cluster=real"]}`))
			snap["docker:"+strings.TrimSuffix(strings.Split(what, "?")[0], "/json")] = f.ownObjects(t, b)
		}
	}
	err := filepath.WalkDir(f.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(f.root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %d", fi.Mode(), fi.Size())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc += " " + hex.EncodeToString(sum[:8])
		}
		snap[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return snap
}

func diffSnapshots(before, after map[string]string) string {
	var lines []string
	for p, b := range before {
		switch a, ok := after[p]; {
		case !ok:
			lines = append(lines, "- "+p+" ("+b+")")
		case a != b:
			lines = append(lines, "~ "+p+": "+b+" -> "+a)
		}
	}
	for p, a := range after {
		if _, ok := before[p]; !ok {
			lines = append(lines, "+ "+p+" ("+a+")")
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// requestLog is what hwk asked the Docker engine through the proxy.
type requestLog struct {
	mu      sync.Mutex
	all     int
	changes []string
}

func (l *requestLog) writes() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.changes)
}

func (l *requestLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all
}

// ownObjects returns an engine list (containers, networks, or volumes) less
// the objects another run of this test made at the same time on the same
// engine (a Linux and a Windows run, say), in a stable order: everything
// of cluster real, the fixture's own objects included, stays.
func (f *hostileFixture) ownObjects(t *testing.T, list []byte) string {
	t.Helper()
	var items []map[string]any
	var volumes struct{ Volumes []map[string]any }
	if err := json.Unmarshal(list, &items); err != nil {
		if err := json.Unmarshal(list, &volumes); err != nil {
			t.Fatalf("an engine list that is not one: %v\n%s", err, list)
		}
		items = volumes.Volumes
	}
	var keep []map[string]any
	for _, it := range items {
		labels, _ := it["Labels"].(map[string]any)
		if other, ok := labels["hwk.dev/hostile-test"]; ok && other != f.objects {
			continue
		}
		keep = append(keep, it)
	}
	slices.SortFunc(keep, func(a, b map[string]any) int {
		return strings.Compare(fmt.Sprint(a["Name"], a["Id"]), fmt.Sprint(b["Name"], b["Id"]))
	})
	b, err := json.Marshal(keep)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dockerProxy puts a proxy in front of the Docker engine and points hwk at
// it: reads pass, so hwk sees the real engine; anything else is refused
// and recorded. Without an engine hwk gets a proxy with nothing behind it,
// which refuses everything (HWK_REQUIRE_DOCKER makes that a failure).
func (f *hostileFixture) dockerProxy(t *testing.T) *requestLog {
	// The engine the environment names (DOCKER_HOST, else the platform's
	// socket or pipe), as hwk itself would find it.
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	engine, dialEngine := cli.DaemonHost(), cli.Dialer()
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) { return dialEngine(ctx) }
	probe, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	conn, err := dialEngine(probe)
	cancel()
	if err != nil {
		if os.Getenv("HWK_REQUIRE_DOCKER") != "" {
			t.Fatalf("HWK_REQUIRE_DOCKER is set but there is no engine at %s: %v", engine, err)
		}
		t.Logf("no Docker engine at %s: the proxy answers every request with an error", engine)
	} else {
		conn.Close()
		f.engine = &http.Client{Transport: &http.Transport{DialContext: dial}}
		// A network and a volume of cluster real, as up makes them: a
		// command that reached them would change the snapshot.
		// Unique on the engine, which another run of this test (another
		// machine's, or a Wine prefix's, where pids start again) may
		// share.
		name := fmt.Sprintf("hwk-hostile-%d-%s", os.Getpid(), randomSuffix(t))
		f.objects = name
		labels := `{"hwk.dev/cluster":"real","hwk.dev/hostile-test":"` + name + `"}`
		f.engineDo(t, http.MethodPost, "/networks/create", `{"Name":"`+name+`","Labels":`+labels+`}`)
		f.engineDo(t, http.MethodPost, "/volumes/create", `{"Name":"`+name+`","Labels":`+labels+`}`)
		t.Cleanup(func() {
			for _, p := range []string{"/networks/" + name, "/volumes/" + name} {
				req, _ := http.NewRequest(http.MethodDelete, "http://docker"+p, nil)
				if resp, err := f.engine.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	// hwk.exe reaches an engine over a named pipe or TCP, not a Unix
	// socket: there the proxy listens on loopback TCP.
	var ln net.Listener
	var proxyHost string
	if runtime.GOOS == "windows" {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			proxyHost = "tcp://" + ln.Addr().String()
		}
	} else {
		sock := filepath.Join(f.root, "docker.sock")
		ln, err = net.Listen("unix", sock)
		proxyHost = "unix://" + sock
	}
	if err != nil {
		t.Fatal(err)
	}
	log := &requestLog{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: "docker"})
	rp.Transport = &http.Transport{DialContext: dial}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.mu.Lock()
		log.all++
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		if !read {
			log.changes = append(log.changes, r.Method+" "+r.URL.Path)
		}
		log.mu.Unlock()
		if !read {
			http.Error(w, "the hostile-input test refuses requests that change the engine", http.StatusForbidden)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	f.env = append(f.env, "DOCKER_HOST="+proxyHost)
	return log
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// buildHwk builds hwk once for the tests of this package, its version and
// commit stamped at link time as make build stamps them (TestBinary reads
// them back).
func buildHwk(t *testing.T) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hwk-hostile-")
		if err != nil {
			buildErr = err
			return
		}
		// Windows starts only a file with an executable's extension
		// (exec.LookPath and CreateProcess look for PATHEXT's).
		name := "hwk"
		if runtime.GOOS == "windows" {
			name += ".exe"
		}
		built = filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-o", built,
			"-ldflags", "-X github.com/hwk-dev/hwk/pkg/version.Version=v9.9.9-test -X github.com/hwk-dev/hwk/pkg/version.Commit=abc123", ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built != "" {
		os.RemoveAll(filepath.Dir(built))
	}
	os.Exit(code)
}

func randomSuffix(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// link makes a link at name to the directory target: a symbolic link,
// or on a Windows that does not let this user make one (no Developer
// Mode, not elevated: ERROR_PRIVILEGE_NOT_HELD) a junction, which any
// user can make and which hwk must refuse the same way.
func link(target, name string) error {
	err := os.Symlink(target, name)
	if err == nil || runtime.GOOS != "windows" {
		return err
	}
	if out, jerr := exec.Command("cmd", "/c", "mklink", "/J", name, target).CombinedOutput(); jerr != nil {
		return fmt.Errorf("%w; mklink /J: %v: %s", err, jerr, out)
	}
	return nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
