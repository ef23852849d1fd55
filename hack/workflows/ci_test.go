package workflows

import (
	"slices"
	"strings"
	"testing"
)

// TestCIWorkflow runs ci.yml as a push to main would, every job whose
// runner this machine stands in for (the ubuntu ones): lint, unit, the
// Windows cross-build, the end-to-end tests on the docker driver and the
// Action from this commit. The windows-tests job needs a Windows runner;
// act reports it as an unsupported platform, and the test checks that it
// is the only one left out. One job at a time: each of them alone keeps
// the two CPUs busy, and e2e and action both make clusters.
func TestCIWorkflow(t *testing.T) {
	actBinary(t)
	repo := newRepo(t)
	run := &Run{Repo: repo, Workflow: ".github/workflows/ci.yml", Event: "push",
		EventJSON: map[string]any{"ref": "refs/heads/main"}, Concurrent: 1}
	res := execute(t, run)
	mustPass(t, run, res, "lint", "unit", "windows", "e2e", "action")
	for job, r := range res.Jobs {
		switch {
		case job == "windows-tests":
			if r != "unsupported platform" {
				t.Errorf("windows-tests: %s, want act to leave it out (no Windows runner here)", r)
			}
		case r != "success":
			t.Errorf("job %s: %s", job, r)
		}
	}
	if _, ok := res.Jobs["windows-tests"]; !ok {
		t.Error("act did not say it left windows-tests out")
	}
	// The e2e job asks for the engine restart (HWK_E2E_RESTART_ENGINE),
	// which skips quietly without it.
	if !slices.ContainsFunc(res.Output["e2e"], func(l string) bool { return strings.Contains(l, "E2E RESTART:") }) {
		t.Error("the e2e job printed no E2E RESTART line: the Docker engine restart did not run")
	}
}
