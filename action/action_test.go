// Package action holds the hwk GitHub Action's scripts (action.yml at the
// repository's root runs them). These tests run its steps through
// internal/testing/ghaction, as GitHub's runner would, with a fake hwk program
// that records its arguments, a fake GitHub API for the job's status and
// a fake release server; e2e/action_test.go runs them with the real hwk
// against the docker driver.
package action

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/ghaction"
	"github.com/hwk-dev/hwk/internal/testing/releasetest"
)

// fakeHwk answers the commands the Action runs as hwk would, for what the
// Action reads of them (stdout, exit status), records each call in
// $FAKE_HWK_LOG, and fails a command it does not know, so a new call in
// the scripts breaks these tests until it is answered here.
const fakeHwk = `#!/usr/bin/env bash
echo "$*" >>"$FAKE_HWK_LOG"
case "$1 $2" in
"version "*) printf 'hwk %s\ncommit:   0123456789abcdef0123\ngo:       go1.26.8\nplatform: linux/amd64\n' "${FAKE_HWK_VERSION:-v0.0.0-dev}" ;;
"config validate")
	[ -z "$FAKE_HWK_BAD_CONFIG" ] || { echo "ERROR: $FAKE_HWK_BAD_CONFIG" >&2; exit 1; }
	[ "${*: -2}" = "-o json" ] || { echo "fake hwk: config validate without -o json" >&2; exit 97; }
	printf '{\n  "kind": "Cluster",\n  "kubernetesVersion": "v1.35.4",\n  "nodes": [\n    {\n      "name": "x-cp",\n      "os": "linux",\n      "driver": "%s"\n    }\n  ],\n  "images": {%s}\n}\n' "${FAKE_HWK_DRIVER:-docker}" "${FAKE_HWK_REGISTRY:+\"registry\": \"$FAKE_HWK_REGISTRY\"}" ;;
"up "*) [ -z "$FAKE_HWK_UP_FAILS" ] || { echo "✗ Starting the control plane (kubeadm init): it failed" >&2; exit 1; } ;;
"get kubeconfig") echo "apiVersion: v1" ; echo "kind: Config" ;;
"node-image pull")
	[ -z "$FAKE_HWK_PULL_FAILS" ] || { echo "ERROR: this hwk build pins no published node image for Kubernetes $3" >&2; exit 1; } ;;
"node-image build")
	# node-image build linux --source SOURCE ...: FAKE_HWK_BUILD_FAILS
	# names the sources that fail.
	[[ " $FAKE_HWK_BUILD_FAILS " != *" $5 "* ]] || { echo "ERROR: fake $5 build failed" >&2; exit 1; }
	echo "Node image linux-$7-$5 ready in 1s" ;;
"node-image save")
	# node-image save -o FILE VERSION --formats FORMATS
	echo "fake node image $5 $7" >"$4" ;;
"node-image list") echo "${FAKE_HWK_LIST:-[]}" ;;
"node-image load")
	[ -f "$4" ] && echo "fake hwk loaded: $(cat "$4")" ;;
"export logs")
	d=$(mktemp -d) && mkdir "$d/hwk-logs-x" && echo "2 nodes, nothing failed" >"$d/hwk-logs-x/summary.txt"
	tar -czf "$3/hwk-logs-x.tar.gz" -C "$d" hwk-logs-x && echo "$3/hwk-logs-x.tar.gz" ;;
"down "*) ;;
*) echo "fake hwk: unexpected call: $*" >&2; exit 97 ;;
esac
`

type fixture struct {
	t   *testing.T
	job *ghaction.Job
	hwk string
	log string
	api *ghaction.JobsAPI
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("HWK_REQUIRE_NODE") == "1" {
			t.Fatal("HWK_REQUIRE_NODE=1 but there is no node (Debian: nodejs)")
		}
		t.Skip("the Action's steps run on Node.js, which is not installed")
	}
	root := t.TempDir()
	job, err := ghaction.NewJob("..", root)
	if err != nil {
		t.Fatal(err)
	}
	job.Token = "ghs_faketoken"
	f := &fixture{t: t, job: job, hwk: filepath.Join(root, "bin", "hwk"), log: filepath.Join(root, "hwk.log"), api: &ghaction.JobsAPI{}}
	if err := os.MkdirAll(filepath.Dir(f.hwk), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.hwk, []byte(fakeHwk), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.api)
	t.Cleanup(srv.Close)
	// sudo, apt-get and docker stand-ins, for the node image build: sudo
	// runs its command as whoever runs the tests, apt-get installs
	// nothing, and the engine has only the image FAKE_DOCKER_HAS names.
	fakebin := filepath.Join(root, "fakebin")
	if err := os.MkdirAll(fakebin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, script := range map[string]string{
		"sudo":    "#!/bin/sh\nexec \"$@\"\n",
		"apt-get": "#!/bin/sh\necho \"fake apt-get $*\"\n",
		"docker":  "#!/bin/sh\n[ -n \"$FAKE_DOCKER_HAS\" ] && [ \"$*\" = \"image inspect $FAKE_DOCKER_HAS\" ]\n",
	} {
		if err := os.WriteFile(filepath.Join(fakebin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	job.Env = []string{
		"FAKE_HWK_LOG=" + f.log, "GITHUB_API_URL=" + srv.URL, "RUNNER_TOOL_CACHE=" + filepath.Join(root, "toolcache"),
		"PATH=" + fakebin + string(os.PathListSeparator) + os.Getenv("PATH"),
		// No cache service unless a test starts one, and release
		// downloads that do not answer unless a test says they do.
		"ACTIONS_CACHE_URL=", "ACTIONS_RESULTS_URL=", "ACTIONS_CACHE_SERVICE_V2=",
		"HWK_RELEASE_PROBE_URLS=" + unreachableURL(t),
	}
	return f
}

// unreachableURL is a URL nothing answers at: a server's, closed.
func unreachableURL(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL + "/kubeadm.sha256"
}

func (f *fixture) calls() []string {
	raw, err := os.ReadFile(f.log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(raw)), "\n")
}

// wantCalls checks the hwk calls made so far, in order.
func (f *fixture) wantCalls(want ...string) {
	f.t.Helper()
	if got := f.calls(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		f.t.Errorf("hwk calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func (f *fixture) main(with map[string]string, env ...string) *ghaction.Step {
	f.t.Helper()
	if _, ok := with["hwk-path"]; !ok {
		with["hwk-path"] = f.hwk
	}
	f.job.Env = append(f.job.Env, env...)
	s, err := f.job.Main(context.Background(), with)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Logf("main step (exit %d):\n%s", s.Exit, s.Output)
	return s
}

func (f *fixture) post(with map[string]string) *ghaction.Step {
	f.t.Helper()
	s, err := f.job.Post(context.Background(), with)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Logf("post step (exit %d):\n%s", s.Exit, s.Output)
	return s
}

func TestMain(t *testing.T) {
	f := newFixture(t)
	s := f.main(map[string]string{"name": "ci", "linux-workers": "1", "wait": "3m"})
	if s.Exit != 0 {
		t.Fatalf("main step exited %d", s.Exit)
	}
	kc := filepath.Join(f.job.Temp, "hwk-ci.kubeconfig")
	if s.Outputs["kubeconfig"] != kc || s.Outputs["context"] != "hwk-ci" || s.Outputs["cluster"] != "ci" {
		t.Errorf("outputs %v", s.Outputs)
	}
	if fi, err := os.Stat(kc); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig file: %v %v, want mode 0600", fi, err)
	}
	if s.State["cluster"] != "ci" || s.State["hwk"] != f.hwk {
		t.Errorf("state %v", s.State)
	}
	if len(s.Path) != 1 || s.Path[0] != filepath.Dir(f.hwk) {
		t.Errorf("GITHUB_PATH %v, want %s", s.Path, filepath.Dir(f.hwk))
	}
	f.wantCalls(
		"version",
		"config validate --name ci --linux-workers 1 --windows-workers 0 --driver docker -o json",
		"node-image list -o json",
		"node-image pull v1.35.4 --formats docker",
		"up --name ci --linux-workers 1 --windows-workers 0 --driver docker --wait 3m",
		"get kubeconfig --name ci",
	)
}

func TestMainNodeImages(t *testing.T) {
	f := newFixture(t)
	archive := filepath.Join(f.job.Workspace, "node.tar")
	if err := os.WriteFile(archive, []byte("an archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A reference goes to up (which pulls it); an archive is loaded first.
	s := f.main(map[string]string{"node-image": "registry.example.com/hwk/node:v1.35.4", "config": "cluster.yaml"})
	if s.Exit == 0 || !strings.Contains(s.Output, "::error title=hwk::input config: no file cluster.yaml") {
		t.Errorf("a config that is not there: exit %d", s.Exit)
	}
	if err := os.WriteFile(filepath.Join(f.job.Workspace, "cluster.yaml"), []byte("kind: Cluster\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = f.main(map[string]string{"node-image": "registry.example.com/hwk/node:v1.35.4", "config": "cluster.yaml"})
	if s.Exit != 0 {
		t.Fatalf("main step exited %d", s.Exit)
	}
	s = f.main(map[string]string{"node-image": "node.tar", "name": "b"})
	if s.Exit != 0 {
		t.Fatalf("main step exited %d", s.Exit)
	}
	f.wantCalls(
		"version",
		"config validate --name hwk --config cluster.yaml --image registry.example.com/hwk/node:v1.35.4 -o json",
		"up --name hwk --config cluster.yaml --image registry.example.com/hwk/node:v1.35.4 --wait 6m",
		"get kubeconfig --name hwk",
		"version",
		"config validate --name b --linux-workers 0 --windows-workers 0 --driver docker -o json",
		"node-image load -i node.tar",
		"up --name b --linux-workers 0 --windows-workers 0 --driver docker --wait 6m",
		"get kubeconfig --name b",
	)
}

// TestMainRefusesBadInputs: each bad input fails the step with an error
// annotation that names it, before hwk runs or anything is recorded.
func TestMainRefusesBadInputs(t *testing.T) {
	for _, tc := range []struct {
		with map[string]string
		env  []string
		want string
	}{
		{map[string]string{"export-logs": "sometimes"}, nil, `input export-logs: "sometimes" is not one of on-failure, always, never`},
		{map[string]string{"linux-workers": "two"}, nil, `input linux-workers: "two" is not a number of nodes`},
		{map[string]string{"windows-workers": "1"}, nil, "input windows-workers is 1 but windows-image is empty"},
		{map[string]string{"windows-image": "win.tar"}, nil, "input windows-image: no file win.tar"},
		{map[string]string{"hwk-path": "/nonexistent/hwk"}, nil, "input hwk-path: /nonexistent/hwk is not an executable"},
		{map[string]string{"name": "Bad_Name"}, []string{"FAKE_HWK_BAD_CONFIG=name: \"Bad_Name\" is not a valid cluster name"}, `is not a valid cluster name`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			f := newFixture(t)
			s := f.main(tc.with, tc.env...)
			if s.Exit == 0 || !strings.Contains(s.Output, tc.want) {
				t.Errorf("exit %d, want a failure saying %q", s.Exit, tc.want)
			}
			if len(s.State) != 0 || len(s.Outputs) != 0 {
				t.Errorf("a refused step recorded state %v, outputs %v", s.State, s.Outputs)
			}
			for _, c := range f.calls() {
				if c != "version" && !strings.HasPrefix(c, "config validate") {
					t.Errorf("hwk ran %q for a refused input", c)
				}
			}
		})
	}
}

// TestWindowsWorkersNeedKVM: without /dev/kvm the Action says what a
// Windows worker needs; with it, every node goes on libvirt.
func TestWindowsWorkersNeedKVM(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.job.Workspace, "win.tar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := f.main(map[string]string{"windows-workers": "1", "windows-image": "win.tar"})
	if _, err := os.Stat("/dev/kvm"); err != nil {
		if s.Exit == 0 || !strings.Contains(s.Output, "Windows workers need KVM, and this runner has no /dev/kvm") {
			t.Errorf("no /dev/kvm: exit %d", s.Exit)
		}
		return
	}
	// This machine has /dev/kvm: the step goes on to prepare libvirt,
	// which the fake config's docker driver does not ask for.
	if got := f.calls(); len(got) < 2 || got[1] != "config validate --name hwk --linux-workers 0 --windows-workers 1 --driver libvirt -o json" {
		t.Errorf("hwk calls %v", got)
	}
}

func TestMainRecordsClusterWhenUpFails(t *testing.T) {
	f := newFixture(t)
	s := f.main(map[string]string{"name": "ci"}, "FAKE_HWK_UP_FAILS=1")
	if s.Exit == 0 {
		t.Fatal("main step succeeded with a failing up")
	}
	if s.State["cluster"] != "ci" || len(s.Outputs) != 0 {
		t.Errorf("state %v outputs %v: the post step must know the cluster, and no output may name it", s.State, s.Outputs)
	}
	p := f.post(map[string]string{})
	if p.Exit != 0 || !strings.Contains(strings.Join(f.calls(), "\n"), "down --name ci") {
		t.Errorf("post after a failed up: exit %d, calls %v", p.Exit, f.calls())
	}
}

// TestPost: what the post step does for each job outcome and export-logs
// setting; it always deletes the cluster.
func TestPost(t *testing.T) {
	for _, tc := range []struct {
		name      string
		with      map[string]string
		apiStatus int
		failed    string
		wantLogs  bool
		wantAPI   bool
		say       string
	}{
		{"job failed", nil, 0, "Run tests", true, true, `the job failed (step "Run tests" failed)`},
		{"job succeeded", nil, 0, "", false, true, `every step of job "e2e" succeeded; no logs exported`},
		{"API refuses", nil, 403, "", true, true, "the job's outcome is unknown: GitHub's API answered 403"},
		{"no token", map[string]string{"github-token": ""}, 0, "", true, false, "no github-token"},
		{"always", map[string]string{"export-logs": "always"}, 0, "", true, false, ""},
		{"never", map[string]string{"export-logs": "never"}, 0, "Run tests", false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.api.Status, f.api.Failed = tc.apiStatus, tc.failed
			with := map[string]string{"name": "ci"}
			for k, v := range tc.with {
				with[k] = v
			}
			if m := f.main(with); m.Exit != 0 {
				t.Fatalf("main step exited %d", m.Exit)
			}
			p := f.post(with)
			if p.Exit != 0 {
				t.Errorf("post step exited %d", p.Exit)
			}
			calls := strings.Join(f.calls(), "\n")
			logsDir := filepath.Join(f.job.Temp, "hwk-logs")
			if got := strings.Contains(calls, "export logs "+logsDir+" --name ci"); got != tc.wantLogs {
				t.Errorf("export logs ran: %v, want %v (calls %v)", got, tc.wantLogs, f.calls())
			}
			if tc.wantLogs && !strings.Contains(p.Output, "2 nodes, nothing failed") {
				t.Error("the post step did not print the archive's summary.txt")
			}
			if !strings.HasSuffix(calls, "down --name ci") {
				t.Errorf("the last hwk call is not down: %v", f.calls())
			}
			if got := len(f.api.Requests()) > 0; got != tc.wantAPI {
				t.Errorf("asked the API: %v, want %v", f.api.Requests(), tc.wantAPI)
			}
			for _, r := range f.api.Requests() {
				if !strings.HasSuffix(r, "auth=Bearer ghs_faketoken") {
					t.Errorf("API request without the token: %s", r)
				}
			}
			if !strings.Contains(p.Output, tc.say) {
				t.Errorf("post step does not say %q", tc.say)
			}
			if strings.Contains(p.Output, "ghs_faketoken") {
				t.Error("the post step printed the token")
			}
		})
	}
}

func TestPostWithoutCluster(t *testing.T) {
	f := newFixture(t)
	if m := f.main(map[string]string{"export-logs": "whenever"}); m.Exit == 0 {
		t.Fatal("main step took a bad input")
	}
	p := f.post(map[string]string{})
	if p.Exit != 0 || !strings.Contains(p.Output, "the main step made nothing to clean up") || len(f.calls()) != 0 || len(f.api.Requests()) != 0 {
		t.Errorf("post with nothing recorded: exit %d, hwk calls %v, API requests %v", p.Exit, f.calls(), f.api.Requests())
	}
}

// TestInstall: with no hwk-path the Action installs the release with
// install.sh, which checks the archive against checksums.txt; a tampered
// archive installs nothing and makes nothing.
func TestInstall(t *testing.T) {
	for _, tamper := range []bool{false, true} {
		t.Run(fmt.Sprintf("tampered=%v", tamper), func(t *testing.T) {
			f := newFixture(t)
			if runtime.GOARCH != "amd64" {
				t.Skip("the fake release has only linux/amd64")
			}
			rel, archive, err := releasetest.New("v9.8.7", "linux", "amd64", map[string][]byte{
				"hwk": []byte(fakeHwk), "windows-amd64/hwk-seed.exe": []byte("MZ"), "windows-amd64/hwk-kubelet.exe": []byte("MZ"),
			})
			if err != nil {
				t.Fatal(err)
			}
			if tamper {
				rel.Assets[archive] = append(rel.Assets[archive], 0)
			}
			srv := httptest.NewServer(rel)
			defer srv.Close()
			s := f.main(map[string]string{"hwk-path": "", "version": "v9.8.7"}, "HWK_RELEASE_URL="+srv.URL)
			installed := filepath.Join(f.job.Temp, "..", "toolcache", "hwk", "v9.8.7", "hwk")
			if tamper {
				if s.Exit == 0 || !strings.Contains(s.Output, "the download is corrupt or was tampered with; nothing was installed") {
					t.Errorf("tampered archive: exit %d", s.Exit)
				}
				if _, err := os.Stat(installed); !os.IsNotExist(err) || len(s.State) != 0 || len(f.calls()) != 0 {
					t.Errorf("a tampered archive installed or ran something: %v %v %v", err, s.State, f.calls())
				}
				return
			}
			installed = filepath.Clean(installed)
			if s.Exit != 0 || s.State["hwk"] != installed {
				t.Errorf("exit %d, state %v, want hwk at %s", s.Exit, s.State, installed)
			}
			if len(s.Path) != 1 || s.Path[0] != filepath.Dir(installed) {
				t.Errorf("GITHUB_PATH %v", s.Path)
			}
		})
	}
}

// TestNodeImageBuiltAndCached: with no pinned image to pull, the main step
// builds the Linux node image (from source, since the release downloads
// do not answer here), saves it in the Actions cache under hwk's and
// Kubernetes' versions, and the next job, on another runner, loads it from
// there instead of building it. The cache is @actions/cache itself (action/cache.js)
// against a stand-in for the cache service's v1 API.
func TestNodeImageBuiltAndCached(t *testing.T) {
	f := newFixture(t)
	cache := &cacheServer{}
	srv := httptest.NewServer(cache)
	defer srv.Close()
	cache.url = srv.URL
	env := []string{"FAKE_HWK_PULL_FAILS=1", "FAKE_HWK_VERSION=v0.3.0", "ACTIONS_CACHE_URL=" + srv.URL + "/", "ACTIONS_RUNTIME_TOKEN=fake-runtime-token"}
	s := f.main(map[string]string{"name": "ci"}, env...)
	if s.Exit != 0 {
		t.Fatalf("main step exited %d", s.Exit)
	}
	key := "hwk-node-image-linux-" + unameM(t) + "-v0.3.0-v1.35.4-docker"
	for _, say := range []string{
		"the pinned Linux node image for Kubernetes v1.35.4 could not be pulled",
		"the Actions cache has no entry " + key + ": building the image",
		"building the Linux node image for Kubernetes v1.35.4 from source, not from release downloads: " + unreachableHost(f) + " did not answer",
		"built the Linux node image for Kubernetes v1.35.4 from source",
		"saved the Linux node image in the Actions cache (key " + key + ")",
	} {
		if !strings.Contains(s.Output, say) {
			t.Errorf("the main step does not say %q", say)
		}
	}
	archive := filepath.Join(f.job.Temp, "hwk-node-image.tar")
	f.wantCalls(
		"version",
		"config validate --name ci --linux-workers 0 --windows-workers 0 --driver docker -o json",
		"node-image list -o json",
		"node-image pull v1.35.4 --formats docker",
		"node-image build linux --source source --kubernetes-version v1.35.4 --formats docker",
		"node-image save -o "+archive+" v1.35.4 --formats docker",
		"up --name ci --linux-workers 0 --windows-workers 0 --driver docker --wait 6m",
		"get kubeconfig --name ci",
	)
	if got, want := strings.Join(cache.events(), "; "), "miss "+key+"; reserve "+key+"; commit "+key; got != want {
		t.Errorf("cache service was asked: %s\nwant: %s", got, want)
	}
	if _, err := os.Stat(archive); !os.IsNotExist(err) {
		t.Errorf("the archive is left in RUNNER_TEMP: %v", err)
	}

	// The next job, on a runner whose RUNNER_TEMP is elsewhere: the cache
	// has the image, so nothing is built.
	f2 := newFixture(t)
	s = f2.main(map[string]string{"name": "ci"}, env...)
	if s.Exit != 0 {
		t.Fatalf("main step exited %d", s.Exit)
	}
	f2.wantCalls(
		"version",
		"config validate --name ci --linux-workers 0 --windows-workers 0 --driver docker -o json",
		"node-image list -o json",
		"node-image pull v1.35.4 --formats docker",
		"node-image load -i "+filepath.Join(f2.job.Temp, "hwk-node-image.tar"),
		"up --name ci --linux-workers 0 --windows-workers 0 --driver docker --wait 6m",
		"get kubeconfig --name ci",
	)
	for _, say := range []string{
		"restored the Linux node image from the Actions cache (key " + key + ")",
		"fake hwk loaded: fake node image v1.35.4 docker",
	} {
		if !strings.Contains(s.Output, say) {
			t.Errorf("the second job does not say %q", say)
		}
	}
	if ev := cache.events(); ev[len(ev)-1] != "hit "+key {
		t.Errorf("cache service events %v, want a hit last", ev)
	}
}

// TestNodeImageBuildSources: release downloads that answer are built
// from (minutes); when that build fails the image is built from source;
// without a cache service the image is built and not kept, and the step
// says so.
func TestNodeImageBuildSources(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	for _, tc := range []struct {
		name   string
		env    []string
		builds []string
		say    []string
	}{
		{"release", []string{"HWK_RELEASE_PROBE_URLS=" + up.URL + "/kubeadm.sha256 " + up.URL + "/containerd"},
			[]string{"release"},
			[]string{"built the Linux node image for Kubernetes v1.35.4 from release downloads", "no Actions cache here", "will not be kept for the next run"}},
		{"release fails", []string{"HWK_RELEASE_PROBE_URLS=" + up.URL + "/kubeadm.sha256", "FAKE_HWK_BUILD_FAILS=release"},
			[]string{"release", "source"},
			[]string{"the build from release downloads failed (above); building from source instead", "built the Linux node image for Kubernetes v1.35.4 from source"}},
		{"source fails", []string{"FAKE_HWK_BUILD_FAILS=source"},
			[]string{"source"},
			[]string{"::error title=hwk::building the Linux node image from source failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			s := f.main(map[string]string{}, append(tc.env, "FAKE_HWK_PULL_FAILS=1")...)
			if fails := tc.name == "source fails"; (s.Exit != 0) != fails {
				t.Errorf("main step exited %d", s.Exit)
			}
			var builds []string
			for _, c := range f.calls() {
				if strings.HasPrefix(c, "node-image build linux --source ") {
					builds = append(builds, strings.Fields(c)[4])
				}
				// As root the build is in the cache up reads, and with no
				// cache service there is nothing to save it for.
				if strings.HasPrefix(c, "node-image save") && os.Getuid() == 0 {
					t.Errorf("saved with no cache to keep it in: %s", c)
				}
			}
			if strings.Join(builds, " ") != strings.Join(tc.builds, " ") {
				t.Errorf("built from %v, want %v", builds, tc.builds)
			}
			for _, say := range tc.say {
				if !strings.Contains(s.Output, say) {
					t.Errorf("the main step does not say %q", say)
				}
			}
		})
	}
}

// TestLatestWithoutRelease: version latest before hwk has any release
// fails and says how to go on: an hwk the workflow builds, as hwk-path.
func TestLatestWithoutRelease(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewServer(&releasetest.Release{})
	defer srv.Close()
	s := f.main(map[string]string{"hwk-path": "", "version": "latest"}, "HWK_RELEASE_URL="+srv.URL)
	if s.Exit == 0 {
		t.Fatal("main step succeeded with no release to install")
	}
	for _, say := range []string{
		srv.URL + " has no latest release (none is published yet)",
		"::error title=hwk::installing the latest hwk release failed",
		"give its path as the hwk-path input",
	} {
		if !strings.Contains(s.Output, say) {
			t.Errorf("the main step does not say %q", say)
		}
	}
	if len(s.State) != 0 || len(f.calls()) != 0 {
		t.Errorf("with nothing installed the step recorded %v and ran %v", s.State, f.calls())
	}
}

func unameM(t *testing.T) string {
	out, err := exec.Command("uname", "-m").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// unreachableHost is the URL newFixture's probe goes to.
func unreachableHost(f *fixture) string {
	for _, e := range f.job.Env {
		if v, ok := strings.CutPrefix(e, "HWK_RELEASE_PROBE_URLS="); ok {
			return v
		}
	}
	return ""
}

// TestNodeImageAlreadyThere: an image hwk's cache lists, or the docker
// engine's hwk/node:VERSION (built by an earlier step, with sudo), is
// used as it is: nothing is pulled or built.
func TestNodeImageAlreadyThere(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		say  string
	}{
		{"listed", []string{`FAKE_HWK_LIST=[{"name": "linux-v1.35.4-source-0123", "os": "linux", "kubernetesVersion": "v1.35.4", "artifacts": {"docker": {}, "tar": {}}}]`},
			"using the Linux node image for Kubernetes v1.35.4 in hwk's cache"},
		{"in the engine", []string{"FAKE_DOCKER_HAS=hwk/node:v1.35.4"},
			"using the Linux node image hwk/node:v1.35.4 the Docker engine has"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			s := f.main(map[string]string{}, append(tc.env, "FAKE_HWK_PULL_FAILS=1")...)
			if s.Exit != 0 || !strings.Contains(s.Output, tc.say) {
				t.Errorf("exit %d, want it to say %q", s.Exit, tc.say)
			}
			f.wantCalls(
				"version",
				"config validate --name hwk --linux-workers 0 --windows-workers 0 --driver docker -o json",
				"node-image list -o json",
				"up --name hwk --linux-workers 0 --windows-workers 0 --driver docker --wait 6m",
				"get kubeconfig --name hwk",
			)
		})
	}
	// Another version, or the image without the format, is not it; the
	// pull goes to the config's registry mirror.
	f := newFixture(t)
	s := f.main(map[string]string{}, `FAKE_HWK_LIST=[{"os": "linux", "kubernetesVersion": "v1.34.4", "artifacts": {"docker": {}}}, {"os": "linux", "kubernetesVersion": "v1.35.4", "artifacts": {"qcow2": {}}}]`, "FAKE_DOCKER_HAS=hwk/node:v1.34.4", "FAKE_HWK_REGISTRY=registry.example.com/hwk-dev")
	if s.Exit != 0 || !strings.Contains(strings.Join(f.calls(), "\n"), "node-image pull v1.35.4 --formats docker --registry registry.example.com/hwk-dev") {
		t.Errorf("exit %d, calls %v: want a pull", s.Exit, f.calls())
	}
}
