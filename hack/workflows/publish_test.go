package workflows

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/registrytest"
)

// TestPublishingWorkflow runs .github/workflows/node-images.yaml end to
// end for one Kubernetes version: the image built (from source; the
// build's cache is the machine's, so an image make node-image-test built
// is a cache hit), pushed with hwk node-image push to a real registry on
// 127.0.0.1 with TLS and credentials (standing in for ghcr.io and the
// job's token), the digest pinned in node-images/published.yaml on a
// branch pushed to the origin on disk, and the pull request asked of the
// gh stand-in. Then an hwk built from that branch, in an empty HWK_HOME,
// runs `hwk up` with no image flags, and must pull exactly the pinned
// digest from that registry.
func TestPublishingWorkflow(t *testing.T) {
	actBinary(t)
	version := defaultVersion()
	engineRef := "hwk/node:" + version
	if imageID(engineRef) == "" {
		t.Fatalf("no %s in the Docker engine: make node-image-test (or make e2e) builds the image this test publishes", engineRef)
	}

	reg := registrytest.Start(t, registrytest.Options{TLS: true, Auth: true})
	// docker login in the workflow goes through the engine, which must
	// trust the registry's CA as a runner trusts ghcr.io's.
	reg.TrustInDocker(t)
	repo := newRepo(t)

	// The build's hwk home: empty but for the machine's cache, where
	// earlier stages left the image (its config and clusters are not
	// touched).
	buildHome := filepath.Join(t.TempDir(), "hwk")
	os.MkdirAll(buildHome, 0o700)
	if err := os.Symlink(cacheDir(), filepath.Join(buildHome, "cache")); err != nil {
		t.Fatal(err)
	}

	repository := reg.Addr + "/hwk-dev/node"
	run := &Run{
		Repo: repo, Workflow: ".github/workflows/node-images.yaml", Event: "workflow_dispatch",
		Inputs: map[string]string{"kubernetes-version": version},
		Vars: map[string]string{
			"NODE_IMAGE_REPOSITORY": repository,
			"NODE_IMAGE_SOURCE":     "source",
			"NODE_IMAGE_HWK_HOME":   buildHome,
		},
		Secrets: map[string]string{"GITHUB_TOKEN": reg.Password},
		Actor:   reg.User,
		Env:     []string{"SSL_CERT_FILE=" + reg.CAFile},
	}
	res := execute(t, run)
	mustPass(t, run, res, "versions", "build", "pin")
	if t.Failed() {
		t.FailNow()
	}

	// What was pushed: the digest the build job kept for the pin job.
	digestFile := filepath.Join(repo.Record, "artifacts", "digest-"+version, version)
	data, err := os.ReadFile(digestFile)
	if err != nil {
		t.Fatalf("the build job kept no digest: %v", err)
	}
	digest := strings.TrimSpace(string(data))
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(digest) {
		t.Fatalf("the build job kept %q, not a digest", digest)
	}
	t.Logf("FIGURE the publishing run pushed %s:%s@%s", repository, version, digest)
	var tagPuts []string
	for _, r := range reg.Requests(t) {
		if r.Method == "PUT" && r.Path == fmt.Sprintf("/v2/hwk-dev/node/manifests/%s", version) {
			tagPuts = append(tagPuts, r.Path)
		}
	}
	if len(tagPuts) == 0 {
		t.Errorf("the registry logged no PUT of the index's tag %s", version)
	}

	// The pull request: a branch on the origin, and the request the gh
	// stand-in recorded.
	var head string
	for _, rec := range records(t, filepath.Join(repo.Record, "gh.jsonl")) {
		argv := stringsOf(rec["argv"])
		if len(argv) >= 2 && argv[0] == "pr" && argv[1] == "create" {
			if i := slices.Index(argv, "--head"); i >= 0 && i+1 < len(argv) {
				head = argv[i+1]
			}
			t.Logf("gh stand-in: %q", argv)
		}
	}
	if head == "" {
		t.Fatal("the pin job asked gh for no pull request")
	}
	branch := filepath.Join(t.TempDir(), "branch")
	if out, err := exec.Command("git", "clone", "--quiet", "--branch", head, repo.Origin, branch).CombinedOutput(); err != nil {
		t.Fatalf("the pull request's branch %s is not on the origin: %v\n%s", head, err, out)
	}
	pins := pinsAt(t, branch)
	ref, err := pins.Ref(version, "")
	if err != nil {
		t.Fatalf("the branch does not pin %s: %v", version, err)
	}
	if want := repository + ":" + version + "@" + digest; ref != want {
		t.Fatalf("the branch pins %s, want %s", ref, want)
	}

	// hwk from that branch, an empty home, no image flags.
	bin := filepath.Join(t.TempDir(), "hwk")
	build := exec.Command("go", "build", "-o", bin, "./cmd/hwk")
	build.Dir = branch
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build hwk from %s: %v\n%s", head, err, out)
	}
	// Without the engine's tag up has to pull; the pull brings the same
	// image back.
	sourceID := untagNodeImage(t, version)
	home := t.TempDir()
	const name = "wf-publish"
	env := append(os.Environ(), "HWK_HOME="+home, "SSL_CERT_FILE="+reg.CAFile,
		"DOCKER_CONFIG="+reg.DockerConfig(t, reg.User, reg.Password), "KUBECONFIG="+filepath.Join(home, "kubeconfig"))
	hwk := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { hwk("down", "--name", name) })
	before := len(reg.Requests(t))
	out, err := hwk("up", "--name", name, "--driver", "docker", "--windows-workers", "0")
	t.Logf("hwk up (built from %s, HWK_HOME empty):\n%s", head, out)
	if err != nil {
		t.Fatalf("hwk up: %v", err)
	}
	if want := "Pulling node image " + ref + " (docker)"; !strings.Contains(out, want) {
		t.Errorf("up did not say %q", want)
	}
	pulled := false
	for _, r := range reg.Requests(t)[before:] {
		if r.Method == "GET" && r.Path == "/v2/hwk-dev/node/manifests/"+digest && r.Status == 200 {
			pulled = true
		}
	}
	if !pulled {
		t.Errorf("the registry served no GET of manifests/%s to up", digest)
	}
	if id := imageID(engineRef); id != sourceID {
		t.Errorf("the engine's %s is %s after the pull, want the published %s", engineRef, id, sourceID)
	}
	if out, err := hwk("down", "--name", name); err != nil {
		t.Fatalf("hwk down: %v\n%s", err, out)
	}
}

func stringsOf(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
