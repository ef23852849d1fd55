package workflows

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// breakWorkflow rewrites a workflow in the clone, failing when the text
// to change is not there (so that a test of a broken workflow cannot
// pass by breaking nothing).
func breakWorkflow(t *testing.T, r *Repo, path, old, new string) {
	t.Helper()
	file := filepath.Join(r.Dir, path)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s has no %q to break", path, old)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrokenWorkflowFails: the publishing workflow's versions job with
// its step writing an output under another name than the one the job
// reads. act (as GitHub) runs the job to success with an empty output;
// the check every workflow run here goes through fails it, naming the
// step and the output.
func TestBrokenWorkflowFails(t *testing.T) {
	actBinary(t)
	repo := newRepo(t)
	wf := ".github/workflows/node-images.yaml"
	breakWorkflow(t, repo, wf, `echo "versions=$versions" >> "$GITHUB_OUTPUT"`, `echo "version=$versions" >> "$GITHUB_OUTPUT"`)
	run := &Run{Repo: repo, Workflow: wf, Event: "workflow_dispatch", Jobs: []string{"versions"},
		Inputs: map[string]string{"kubernetes-version": defaultVersion()}}
	res := execute(t, run)
	t.Logf("act's own verdict on the broken workflow: jobs %v, exit %v", res.Jobs, res.Err)
	err := repo.CheckOutputs(wf, res)
	t.Logf("make workflows' verdict: %v", err)
	if err == nil || !strings.Contains(err.Error(), "job versions reads steps.list.outputs.versions, which step list never set (it set: version)") {
		t.Errorf("the output check = %v, want it to name steps.list.outputs.versions", err)
	}
}

// TestMissingStandInFails: a workflow that uses an action with no
// stand-in here fails before act starts, naming the action, instead of
// act trying to clone it from GitHub.
func TestMissingStandInFails(t *testing.T) {
	actBinary(t)
	repo := newRepo(t)
	wf := ".github/workflows/ci.yml"
	breakWorkflow(t, repo, wf, "      - uses: actions/setup-go@v5\n", "      - uses: actions/setup-python@v5\n")
	_, err := (&Run{Repo: repo, Workflow: wf, Event: "push", Jobs: []string{"lint"}, Log: t.Logf}).Execute(actBinary(t))
	t.Logf("Execute: %v", err)
	if err == nil || !strings.Contains(err.Error(), "uses actions/setup-python@v5, which has no stand-in") {
		t.Errorf("Execute = %v, want it to name actions/setup-python@v5", err)
	}
}

// TestFailureIsShown: a job whose step fails is reported with the step
// and the last lines the job printed, so that a failure in a long run can
// be read from the end of the test log alone. The publishing workflow's
// versions job fails, as it should, for a version published.yaml does not
// list.
//
// act v0.2.89 can lose a failing step's last output on the host runner
// (pkg/container/host_environment.go: exec returns on the command's error
// before copyPtyOutput has read the pty; 2 of 20 runs here), so a run
// whose output lacks the step's error line is tried again, up to three
// times; every run must still report the failed job and step.
func TestFailureIsShown(t *testing.T) {
	actBinary(t)
	repo := newRepo(t)
	wf := ".github/workflows/node-images.yaml"
	const message = "v0.0.0-not-listed is not in node-images/published.yaml"
	for attempt := 1; ; attempt++ {
		run := &Run{Repo: repo, Workflow: wf, Event: "workflow_dispatch", Jobs: []string{"versions"},
			Inputs: map[string]string{"kubernetes-version": "v0.0.0-not-listed"}}
		res := execute(t, run)
		if res.Err == nil {
			t.Fatalf("act succeeded with a version published.yaml does not list: %v", res.Jobs)
		}
		got := res.Failures(40)
		t.Logf("Failures:\n%s", got)
		for _, want := range []string{"job versions: failure", "step Versions to publish (Main): failure"} {
			if !strings.Contains(got, want) {
				t.Fatalf("Failures does not say %q", want)
			}
		}
		if strings.Contains(got, message) {
			return
		}
		if attempt == 3 {
			t.Fatalf("Failures does not say %q in %d runs", message, attempt)
		}
		t.Logf("act lost the step's last output (run %d): running again", attempt)
	}
}

// TestGoTestFailures reads real go test -v output: a temporary module
// whose subtest fails with t.Fatalf after logging, a test that passes but
// logs a line holding "--- FAIL: ", and one that fails with t.Errorf.
func TestGoTestFailures(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/failing\n\ngo 1.22\n",
		"x_test.go": `package failing

import "testing"

func TestOuter(t *testing.T) {
	t.Log("before")
	t.Run("inner", func(t *testing.T) {
		t.Log("working")
		t.Fatalf("the pull failed: %s", "exit status 1")
	})
}

func TestPasses(t *testing.T) { t.Log("--- FAIL: only logged") }

func TestSecond(t *testing.T) { t.Errorf("second") }
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-count=1", "-v", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("go test passed:\n%s", out)
	}
	failed, said := goTestFailures(strings.Split(string(out), "\n"))
	t.Logf("failed %q\nsaid %q", failed, said)
	wantFailed := []string{"--- FAIL: TestOuter", "--- FAIL: TestOuter/inner", "--- FAIL: TestSecond"}
	if len(failed) != len(wantFailed) {
		t.Fatalf("failed = %q, want %d lines", failed, len(wantFailed))
	}
	for i, w := range wantFailed {
		if !strings.HasPrefix(failed[i], w+" (") {
			t.Errorf("failed[%d] = %q, want %s (...)", i, failed[i], w)
		}
	}
	if len(said) == 0 || !strings.HasSuffix(said[len(said)-1], "x_test.go:9: the pull failed: exit status 1") {
		t.Errorf("said = %q, want it to end with the Fatalf line", said)
	}
}
