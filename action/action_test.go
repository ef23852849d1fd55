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
"version "*) echo "hwk v0.0.0-fake" ;;
"config validate")
	[ -z "$FAKE_HWK_BAD_CONFIG" ] || { echo "ERROR: $FAKE_HWK_BAD_CONFIG" >&2; exit 1; }
	printf 'apiVersion: hwk.dev/v1alpha1\nkind: Cluster\nnodes:\n  - name: x-cp\n    driver: %s\n' "${FAKE_HWK_DRIVER:-docker}" ;;
"up "*) [ -z "$FAKE_HWK_UP_FAILS" ] || { echo "✗ Starting the control plane (kubeadm init): it failed" >&2; exit 1; } ;;
"get kubeconfig") echo "apiVersion: v1" ; echo "kind: Config" ;;
"node-image load") ;;
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
	job.Env = []string{"FAKE_HWK_LOG=" + f.log, "GITHUB_API_URL=" + srv.URL, "RUNNER_TOOL_CACHE=" + filepath.Join(root, "toolcache")}
	return f
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
		"config validate --name ci --linux-workers 1 --windows-workers 0 --driver docker",
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
		"config validate --name hwk --config cluster.yaml --image registry.example.com/hwk/node:v1.35.4",
		"up --name hwk --config cluster.yaml --image registry.example.com/hwk/node:v1.35.4 --wait 6m",
		"get kubeconfig --name hwk",
		"version",
		"config validate --name b --linux-workers 0 --windows-workers 0 --driver docker",
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
	if got := f.calls(); len(got) < 2 || got[1] != "config validate --name hwk --linux-workers 0 --windows-workers 1 --driver libvirt" {
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
