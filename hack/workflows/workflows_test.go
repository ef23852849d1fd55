package workflows

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/nodeimage/imagedist"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// actBinary is the act program `make workflows` built (HWK_ACT). Without
// it the tests skip, unless HWK_REQUIRE_WORKFLOWS=1; under -short they
// skip.
func actBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("the workflows make clusters and build releases: not in -short")
	}
	act := os.Getenv("HWK_ACT")
	if act == "" {
		if os.Getenv("HWK_REQUIRE_WORKFLOWS") == "1" {
			t.Fatal("HWK_ACT is not set: run make workflows")
		}
		t.Skip("the workflows run under nektos/act: make workflows (HWK_ACT names the act binary)")
	}
	return act
}

// hwkBinary is the hwk `make build` built (HWK_BIN).
func hwkBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("HWK_BIN")
	if bin == "" {
		t.Fatal("HWK_BIN is not set: run make workflows")
	}
	return bin
}

func newRepo(t *testing.T) *Repo {
	t.Helper()
	src, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRepo(src, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// execute runs act and logs its summary; the caller checks the result.
func execute(t *testing.T, run *Run) *Result {
	t.Helper()
	if run.Log == nil {
		run.Log = t.Logf
	}
	res, err := run.Execute(actBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("act's summary of %s:\n%s", run.Workflow, res.Summary())
	return res
}

// mustPass fails the test unless every job succeeded and every step
// output read was set.
func mustPass(t *testing.T, run *Run, res *Result, jobs ...string) {
	t.Helper()
	if res.Err != nil {
		t.Fatalf("act %s: %v (JSON log %s)\n%s", run.Workflow, res.Err, res.JSONLog, res.Failures(40))
	}
	for _, j := range jobs {
		ok := false
		for id, r := range res.Jobs {
			if id == j || strings.HasPrefix(id, j+" (") {
				ok = r == "success"
				if !ok {
					break
				}
			}
		}
		if !ok {
			t.Errorf("job %s did not succeed: %v", j, res.Jobs)
		}
	}
	if err := run.Repo.CheckOutputs(run.Workflow, res); err != nil {
		t.Error(err)
	}
}

// records reads a stand-in's record file (one JSON object a line).
func records(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the stand-in recorded nothing: %v", err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v: %s", path, err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func imageID(ref string) string {
	out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", ref).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// cacheDir is the machine's hwk cache, where make node-image-test left
// the node image.
func cacheDir() string { return state.DefaultDirs().Cache }

// defaultVersion is the Kubernetes version `make node-image-test` and
// `make e2e` build the node image for.
func defaultVersion() string { return config.DefaultKubernetesVersion }

// pinsAt reads node-images/published.yaml in a checkout.
func pinsAt(t *testing.T, dir string) *imagedist.Pins {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "node-images", "published.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := imagedist.ParsePins(data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEnvLeavesOutHarness: the steps act runs do not see make workflows'
// own variables. ci.yml's unit job runs go test ./..., and with HWK_ACT
// these tests would run again inside it, each one making clusters.
func TestEnvLeavesOutHarness(t *testing.T) {
	t.Setenv("HWK_ACT", "/x/act")
	t.Setenv("HWK_REQUIRE_WORKFLOWS", "1")
	t.Setenv("HWK_BIN", "/x/hwk")
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), ".kube", "config"))
	home := filepath.Join(t.TempDir(), "h")
	r := &Repo{Home: home, Record: filepath.Join(t.TempDir(), "r")}
	kubeconfig := 0
	for _, kv := range r.Env() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HWK_ACT", "HWK_REQUIRE_WORKFLOWS", "HWK_BIN":
			t.Errorf("a step would see %s", kv)
		case "KUBECONFIG":
			kubeconfig++
			if kv != "KUBECONFIG="+filepath.Join(home, ".kube", "config") {
				t.Errorf("a step would see %s", kv)
			}
		}
	}
	if kubeconfig != 1 {
		t.Errorf("a step would see %d KUBECONFIG variables, want the repository's one", kubeconfig)
	}
}

// untagNodeImage takes the tag hwk/node:VERSION off the engine's image
// for the test, so that what the test runs has to pull or build it; a
// second tag keeps the image's layers. When the test ends the tag is on
// that image again, and an image something else put under the tag in
// the meantime is removed. It returns the image's ID.
func untagNodeImage(t *testing.T, version string) string {
	t.Helper()
	ref := "hwk/node:" + version
	id := imageID(ref)
	if id == "" {
		t.Fatalf("no %s in the Docker engine: make node-image-test (or make e2e) builds it", ref)
	}
	keep := "hwk-workflows-keep/node:" + version
	docker(t, "tag", ref, keep)
	t.Cleanup(func() {
		if now := imageID(ref); now != id && now != "" {
			exec.Command("docker", "rmi", ref).Run()
		}
		exec.Command("docker", "tag", keep, ref).Run()
		exec.Command("docker", "rmi", keep).Run()
	})
	docker(t, "rmi", ref)
	return id
}
