package workflows

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/releasetest"
)

// TestActionWorkflow runs hack/workflows/testdata/action.yml: the Action
// with no inputs and no pinned node image (hwk from the latest release,
// served here with its checksums, as GitHub serves releases), then as
// hwk-dev/hwk@v0 with a step that fails. Both clusters are made on the
// docker driver, answer kubectl through the Action's outputs, and are gone
// after the post steps, which export the logs of the job that failed.
func TestActionWorkflow(t *testing.T) {
	actBinary(t)
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the release served here is linux/amd64")
	}
	bin := hwkBinary(t)
	version := defaultVersion()
	engineRef := "hwk/node:" + version
	if imageID(engineRef) == "" {
		t.Fatalf("no %s in the Docker engine: make node-image-test (or make e2e) builds it", engineRef)
	}
	clusters := []string{"hwk", "wf-remote"}
	// The Action's default cluster name is hwk: a user's cluster of that
	// name on this machine would be deleted by the post step.
	for _, c := range clusters {
		if out := strings.TrimSpace(docker(t, "ps", "-a", "-q", "--filter", "label=hwk.dev/cluster="+c)); out != "" {
			t.Fatalf("this machine has containers of a cluster named %s; the Action's run would remove them: hwk down --name %s first", c, c)
		}
	}

	repo := newRepo(t)
	// hwk's state for the run: no node image, but the machine's caches of
	// what a build is made of (components built from source, the
	// Debian root, container images), so that the Action's build
	// assembles the image anew in minutes instead of compiling
	// Kubernetes again.
	home := filepath.Join(t.TempDir(), "hwk")
	if err := os.MkdirAll(filepath.Join(home, "cache", "node-images"), 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(cacheDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != "node-images" && e.Name() != "logs" {
			if err := os.Symlink(filepath.Join(cacheDir(), e.Name()), filepath.Join(home, "cache", e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	// kubectl, which GitHub's runner images have: the node image's.
	tools := t.TempDir()
	box := "hwk-workflows-kubectl-" + filepath.Base(tools)
	docker(t, "create", "--name", box, engineRef)
	docker(t, "cp", box+":/usr/local/bin/kubectl", filepath.Join(tools, "kubectl"))
	docker(t, "rm", box)
	repo.PathDirs = append(repo.PathDirs, tools)

	// Nor does the engine have it, for the run.
	untagNodeImage(t, version)

	served, err := releasetest.OfBuild("v0.0.1", bin, filepath.Join(repo.Source, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	release := httptest.NewServer(served)
	defer release.Close()
	t.Cleanup(func() {
		for _, c := range clusters {
			cmd := exec.Command(bin, "down", "--name", c)
			cmd.Env = append(os.Environ(), "HWK_HOME="+home)
			cmd.Run()
		}
	})
	run := &Run{Repo: repo, Workflow: "hack/workflows/testdata/action.yml", Event: "push",
		Env: []string{"HWK_HOME=" + home, "HWK_RELEASE_URL=" + release.URL}, Concurrent: 1,
		Vars: map[string]string{"KUBERNETES_VERSION": version}}
	res := execute(t, run)
	if err := repo.CheckOutputs(run.Workflow, res); err != nil {
		t.Error(err)
	}
	if strings.Contains(strings.Join(res.Output["remote"], "\n"), "hwk: built the Linux node image") {
		t.Error("job remote built the node image instead of restoring it from the Actions cache")
	}
	if res.Jobs["local"] != "success" {
		t.Errorf("job local (the Action with no inputs): %s, want success", res.Jobs["local"])
	}
	if res.Jobs["remote"] != "failure" {
		t.Errorf("job remote: %s, want failure (its last step fails on purpose)", res.Jobs["remote"])
	}
	for _, want := range []struct{ job, stage, step, result string }{
		{"local", "Main", "./", "success"},
		{"remote", "Main", "A fresh runner", "success"},
		{"local", "Main", "The cluster answers through the outputs", "success"},
		{"local", "Post", "./", "success"},
		{"remote", "Main", "hwk-dev/hwk@v0", "success"},
		{"remote", "Main", "The cluster answers through the outputs", "success"},
		{"remote", "Main", "A test that fails", "failure"},
		{"remote", "Post", "hwk-dev/hwk@v0", "success"},
	} {
		if got := res.stepResult(want.job, want.stage, want.step); got != want.result {
			t.Errorf("job %s, %s %s: %q, want %s", want.job, want.stage, want.step, got, want.result)
		}
	}
	local, remote := strings.Join(res.Output["local"], "\n"), strings.Join(res.Output["remote"], "\n")
	for _, want := range []string{
		"Downloading hwk_0.0.1_linux_amd64.tar.gz (v0.0.1)",
		"hwk: the pinned Linux node image for Kubernetes " + version + " could not be pulled",
		"hwk: the Actions cache has no entry hwk-node-image-linux-",
		"hwk: built the Linux node image for Kubernetes " + version + " from source",
		"hwk: saved the Linux node image in the Actions cache (key hwk-node-image-linux-",
		"Cluster hwk is up",
	} {
		if !strings.Contains(local, want) {
			t.Errorf("job local did not print %q", want)
		}
	}
	for _, want := range []string{
		"hwk: restored the Linux node image from the Actions cache (key hwk-node-image-linux-",
		"Cluster wf-remote is up",
		"hwk: logs of cluster wf-remote in ",
	} {
		if !strings.Contains(remote, want) {
			t.Errorf("job remote did not print %q", want)
		}
	}

	// Nothing left: no container or network of either cluster, no state,
	// no kubeconfig context.
	for _, c := range clusters {
		if out := docker(t, "ps", "-a", "-q", "--filter", "label=hwk.dev/cluster="+c); out != "" {
			t.Errorf("containers of %s are left: %s", c, out)
		}
		if out := docker(t, "network", "ls", "-q", "--filter", "label=hwk.dev/cluster="+c); out != "" {
			t.Errorf("networks of %s are left: %s", c, out)
		}
		if _, err := os.Stat(filepath.Join(home, "data", "clusters", c)); err == nil {
			t.Errorf("the state of %s is left", c)
		}
	}
	if data, err := os.ReadFile(filepath.Join(repo.Home, ".kube", "config")); err == nil {
		for _, c := range clusters {
			if strings.Contains(string(data), "hwk-"+c) {
				t.Errorf("the kubeconfig still names hwk-%s:\n%s", c, data)
			}
		}
	}
}

// stepResult is the result of the step named name in the job's stage
// ("" when it did not run).
func (res *Result) stepResult(job, stage, name string) string {
	for _, s := range res.Steps {
		if s.Job == job && s.Stage == stage && s.Name == name && !strings.Contains(s.ID, "/") {
			return s.Result
		}
	}
	return ""
}
