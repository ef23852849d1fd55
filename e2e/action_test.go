//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/ghaction"
	"github.com/hwk-dev/hwk/internal/testing/releasetest"
)

// TestAction runs the hwk GitHub Action's main and post steps as GitHub's
// runner would (internal/testing/ghaction: the inputs as INPUT_* variables, node
// starting action/main.js and action/post.js, the file commands read back)
// with the real hwk on the docker driver: hwk comes from a release served
// here (this build, in the archive layout goreleaser makes, checked
// against its checksums.txt by install.sh), the cluster answers kubectl
// through the kubeconfig file the step outputs, and with the job reported
// failed by a stand-in for GitHub's API the post step leaves a logs
// archive and nothing of the cluster.
func TestAction(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("the Action's steps run on Node.js, which is not installed")
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the release served here is linux/amd64")
	}
	e := newEnv(t)
	const name = "e2e-action"
	t.Cleanup(func() { e.hwk("down", "--name", name) })

	release := httptest.NewServer(releaseOf(t, e.bin, "v0.0.1"))
	defer release.Close()
	api := &ghaction.JobsAPI{Failed: "Run integration tests"}
	apiSrv := httptest.NewServer(api)
	defer apiSrv.Close()

	root := t.TempDir()
	job, err := ghaction.NewJob("..", root)
	if err != nil {
		t.Fatal(err)
	}
	job.Token = "ghs_e2etoken"
	job.Env = []string{
		"HWK_HOME=" + e.home, "KUBECONFIG=" + e.kubeconfig,
		"HWK_RELEASE_URL=" + release.URL, "GITHUB_API_URL=" + apiSrv.URL,
		"RUNNER_TOOL_CACHE=" + filepath.Join(root, "toolcache"),
	}
	with := map[string]string{"name": name, "version": "v0.0.1", "linux-workers": "1"}
	main, err := job.Main(context.Background(), with)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("main step (exit %d):\n%s", main.Exit, main.Output)
	if main.Exit != 0 {
		t.Fatalf("main step exited %d", main.Exit)
	}
	installed := filepath.Join(root, "toolcache", "hwk", "v0.0.1", "hwk")
	if main.State["hwk"] != installed || !slices.Contains(main.Path, filepath.Dir(installed)) {
		t.Errorf("hwk not installed from the release: state %v, path %v", main.State, main.Path)
	}
	if !strings.Contains(main.Output, "(checksum verified)") {
		t.Error("install.sh did not verify the archive")
	}

	kubectl := copyKubectl(t, name+"-cp")
	out, err := exec.Command(kubectl, "--kubeconfig", main.Outputs["kubeconfig"], "--context", main.Outputs["context"],
		"get", "nodes", "-o", "name").CombinedOutput()
	t.Logf("kubectl get nodes through the output kubeconfig %s: %v\n%s", main.Outputs["kubeconfig"], err, out)
	if err != nil || strings.Join(strings.Fields(string(out)), " ") != "node/"+name+"-cp node/"+name+"-linux-1" {
		t.Errorf("kubectl through the Action's kubeconfig output: %v %q", err, out)
	}
	if main.Outputs["context"] != "hwk-"+name {
		t.Errorf("context output %q", main.Outputs["context"])
	}

	post, err := job.Post(context.Background(), with)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("post step (exit %d):\n%s", post.Exit, post.Output)
	if post.Exit != 0 {
		t.Errorf("post step exited %d", post.Exit)
	}
	archives, _ := filepath.Glob(filepath.Join(job.Temp, "hwk-logs", "hwk-logs-"+name+"-*.tar.gz"))
	if len(archives) != 1 {
		t.Fatalf("logs archives after a failed job: %v", archives)
	}
	list := strings.Fields(string(mustOutput(t, "tar", "tzf", archives[0])))
	for _, want := range []string{"/summary.txt", "/nodes/" + name + "-cp/kubelet.journal.log", "/nodes/" + name + "-linux-1/kubelet.journal.log", "/cluster/pods.yaml"} {
		if !slices.ContainsFunc(list, func(f string) bool { return strings.HasSuffix(f, want) }) {
			t.Errorf("the logs archive has no %s", want)
		}
	}
	if !strings.Contains(post.Output, `the job failed (step "Run integration tests" failed)`) {
		t.Error("the post step did not say why it exported logs")
	}
	e.assertGone(name)
}

// releaseOf is a release of the hwk binary bin: the archive goreleaser
// makes for linux/amd64 (hwk, the README, the Windows programs in
// windows-amd64/) and checksums.txt.
func releaseOf(t *testing.T, bin, tag string) http.Handler {
	t.Helper()
	r, err := releasetest.OfBuild(tag, bin, "../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return r
}
