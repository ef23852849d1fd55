package ghaction

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
)

// JobsAPI answers GitHub's "List jobs for a workflow run attempt"
// (GET /repos/{owner}/{repo}/actions/runs/{run_id}/attempts/{attempt}/jobs,
// docs.github.com/en/rest/actions/workflow-jobs) for the run a Job's steps
// see (example/app, run 4242, attempt 1), in the documented shape:
// {"total_count", "jobs": [{"id", "name", "status", "conclusion",
// "runner_name", "steps": [{"name", "status", "conclusion", "number"}]}]}.
// Before the job on this runner ("GitHub Actions 7") it lists another of
// the run's jobs, in progress on another runner with a failed step, which
// a reader must not take for its own.
type JobsAPI struct {
	// Status, when not 0, is the HTTP status of every answer, with the body
	// GitHub sends when the token lacks the permission.
	Status int
	// Failed names a step of this runner's job that failed; empty, every
	// step so far succeeded.
	Failed string

	mu       sync.Mutex
	requests []string
}

// Requests lists what was asked: method, path and query, and the
// Authorization header.
func (a *JobsAPI) Requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.requests...)
}

func (a *JobsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.requests = append(a.requests, r.Method+" "+r.URL.RequestURI()+" auth="+r.Header.Get("Authorization"))
	a.mu.Unlock()
	if a.Status != 0 {
		w.WriteHeader(a.Status)
		fmt.Fprintf(w, `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest/actions/workflow-jobs#list-jobs-for-a-workflow-run-attempt","status":"%d"}`, a.Status)
		return
	}
	if r.URL.Path != "/repos/example/app/actions/runs/4242/attempts/1/jobs" {
		http.NotFound(w, r)
		return
	}
	step := func(n int, name, conclusion string) map[string]any {
		s := map[string]any{"name": name, "status": "completed", "conclusion": conclusion, "number": n}
		if conclusion == "" {
			s["status"], s["conclusion"] = "in_progress", nil
		}
		return s
	}
	ours := []any{step(1, "Set up job", "success"), step(2, "Run hwk-dev/hwk@v0", "success")}
	if a.Failed != "" {
		ours = append(ours, step(3, a.Failed, "failure"), step(4, "Upload results", "skipped"))
	} else {
		ours = append(ours, step(3, "Run tests", "success"))
	}
	ours = append(ours, step(len(ours)+1, "Post Run hwk-dev/hwk@v0", ""))
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(map[string]any{"total_count": 2, "jobs": []any{
		map[string]any{"id": 1, "name": "lint", "status": "in_progress", "conclusion": nil, "runner_name": "GitHub Actions 3",
			"steps": []any{step(1, "Set up job", "success"), step(2, "Lint", "failure")}},
		map[string]any{"id": 2, "name": "e2e", "status": "in_progress", "conclusion": nil, "runner_name": runnerName, "steps": ours},
	}})
}
