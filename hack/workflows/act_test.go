// Package workflows runs hwk's GitHub workflows and its Action on this
// machine with nektos/act (pinned by hack/act/go.mod), offline: act runs
// each job's steps on the host (-P RUNNER=-self-hosted), and every action
// a workflow uses from another repository is replaced by a small local
// stand-in under actions/ (--local-repository), so nothing is cloned from
// GitHub. Tools a GitHub runner has and this machine lacks (the GitHub
// CLI) are stood in for by programs in bin/, which record what they were
// asked to do. `make workflows` runs the tests of this package; without
// HWK_ACT (the act binary) they skip.
package workflows

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// Run is one act invocation: one workflow, one event.
type Run struct {
	// Repo is the repository act runs in (a clone, see NewRepo).
	Repo *Repo
	// Workflow is the workflow file, relative to Repo.Dir.
	Workflow string
	// Event is the event act simulates (push, workflow_dispatch), and
	// EventJSON its payload (github.event; "ref" sets GITHUB_REF).
	Event     string
	EventJSON map[string]any
	// Jobs, when not empty, runs only these job IDs (and what they need).
	Jobs []string
	// Inputs (workflow_dispatch), Vars (repository variables) and
	// Secrets, as GitHub would give them.
	Inputs, Vars, Secrets map[string]string
	// Env is added to the environment act, and so every step, runs in.
	Env []string
	// Actor is github.actor.
	Actor string
	// Concurrent is how many jobs run at once (act's default: one per
	// CPU). Jobs that each make a cluster or load the CPUs run one at
	// a time here.
	Concurrent int
	// Log is where act's human-readable lines go as they come (the test
	// log), besides the file of the raw JSON log.
	Log func(format string, args ...any)
}

// Result is what act did.
type Result struct {
	// Jobs maps a job ID to its result (success, failure), as act
	// reported it at the job's end; a matrix job's runs are "ID (matrix)".
	// A job act did not run because no runner here stands in for its
	// runs-on (a Windows runner) is "unsupported platform".
	Jobs map[string]string
	// Steps are every step act ran or skipped, in order.
	Steps []Step
	// Outputs are the outputs each step set: job ID, then step ID, then
	// name.
	Outputs map[string]map[string]map[string]string
	// Output is what each job's steps printed, a line each.
	Output map[string][]string
	// Log is, for each job, every line act showed of it: its steps'
	// output ("| " first), results, annotations and errors.
	Log map[string][]string
	// Err is act's exit error (nil when every job succeeded).
	Err error
	// JSONLog is the file with act's raw JSON log.
	JSONLog string
}

// Step is one step's result.
type Step struct {
	Job, Stage, Name, ID, Result string
	Duration                     time.Duration
}

// record is one line of act's --json log (the fields read here).
type record struct {
	Job        string         `json:"job"`
	JobID      string         `json:"jobID"`
	Matrix     map[string]any `json:"matrix"`
	Msg        string         `json:"msg"`
	Level      string         `json:"level"`
	Stage      string         `json:"stage"`
	Step       string         `json:"step"`
	StepID     []string       `json:"stepID"`
	StepResult string         `json:"stepResult"`
	JobResult  string         `json:"jobResult"`
	Exec       int64          `json:"executionTime"`
	RawOutput  bool           `json:"raw_output"`
	Command    string         `json:"command"`
	Name       string         `json:"name"`
	Arg        string         `json:"arg"`
}

// Execute runs act and reads its JSON log as it comes.
func (r *Run) Execute(act string) (*Result, error) {
	repo := r.Repo
	locals, err := repo.localRepositories(r.Workflow)
	if err != nil {
		return nil, err
	}
	scratch, err := os.MkdirTemp(repo.Root, "act-")
	if err != nil {
		return nil, err
	}
	args := []string{r.Event, "--json",
		"-W", r.Workflow,
		// Every job on the host: a GitHub-hosted Ubuntu runner is
		// stood in for by this machine.
		"-P", "ubuntu-24.04=-self-hosted", "-P", "ubuntu-latest=-self-hosted",
		// act's own caches and workspaces, kept out of the user's
		// ~/.cache/act; the cache server (actions/cache's API) on
		// loopback.
		"--action-cache-path", filepath.Join(scratch, "actions"),
		"--cache-server-path", filepath.Join(scratch, "cache-server"),
		"--cache-server-addr", "127.0.0.1",
		"--artifact-server-path", filepath.Join(scratch, "artifacts"),
		"--artifact-server-addr", "127.0.0.1", "--artifact-server-port", "0",
		// Only the stand-ins: act must never reach GitHub.
		"--action-offline-mode",
	}
	for _, l := range locals {
		args = append(args, "--local-repository", l)
	}
	for _, j := range r.Jobs {
		args = append(args, "-j", j)
	}
	if r.EventJSON != nil {
		ev := filepath.Join(scratch, "event.json")
		data, err := json.Marshal(r.EventJSON)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(ev, data, 0o600); err != nil {
			return nil, err
		}
		args = append(args, "-e", ev)
	}
	for _, kv := range sortedPairs(r.Inputs) {
		args = append(args, "--input", kv)
	}
	for _, kv := range sortedPairs(r.Vars) {
		args = append(args, "--var", kv)
	}
	// Secrets go in a file, not on the command line, where ps shows them.
	if len(r.Secrets) > 0 {
		sf := filepath.Join(scratch, "secrets")
		if err := os.WriteFile(sf, []byte(strings.Join(sortedPairs(r.Secrets), "\n")+"\n"), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--secret-file", sf)
	}
	if r.Actor != "" {
		args = append(args, "--actor", r.Actor)
	}
	if r.Concurrent > 0 {
		args = append(args, "--concurrent-jobs", fmt.Sprint(r.Concurrent))
	}

	cmd := exec.Command(act, args...)
	cmd.Dir = repo.Dir
	cmd.Env = append(repo.Env(), r.Env...)
	jsonLog := filepath.Join(scratch, "act.jsonl")
	logFile, err := os.Create(jsonLog)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	if r.Log != nil {
		r.Log("act %s -W %s (in %s; JSON log %s)", r.Event, r.Workflow, repo.Dir, jsonLog)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start act: %w", err)
	}
	res := &Result{Jobs: map[string]string{}, Output: map[string][]string{}, Log: map[string][]string{}, Outputs: map[string]map[string]map[string]string{}, JSONLog: jsonLog}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			line := sc.Bytes()
			logFile.Write(append(line, '\n'))
			res.read(line, r.Log)
		}
		io.Copy(io.Discard, pr)
	}()
	res.Err = cmd.Wait()
	pw.Close()
	<-done
	return res, nil
}

func (res *Result) read(line []byte, log func(string, ...any)) {
	var rec record
	if json.Unmarshal(line, &rec) != nil {
		// act's own lines before the run starts (and panics) are not
		// JSON.
		if log != nil {
			log("act: %s", line)
		}
		return
	}
	job := rec.JobID
	if len(rec.Matrix) > 0 {
		job = fmt.Sprintf("%s (%s)", rec.JobID, matrixString(rec.Matrix))
	}
	stepID := strings.Join(rec.StepID, "/")
	switch {
	case strings.Contains(rec.Msg, "Skipping unsupported platform"):
		res.Jobs[job] = "unsupported platform"
	case rec.JobResult != "":
		res.Jobs[job] = rec.JobResult
	case rec.StepResult != "":
		res.Steps = append(res.Steps, Step{Job: job, Stage: rec.Stage, Name: rec.Step, ID: stepID,
			Result: rec.StepResult, Duration: time.Duration(rec.Exec)})
	case rec.Command == "set-output":
		if res.Outputs[rec.JobID] == nil {
			res.Outputs[rec.JobID] = map[string]map[string]string{}
		}
		if res.Outputs[rec.JobID][stepID] == nil {
			res.Outputs[rec.JobID][stepID] = map[string]string{}
		}
		res.Outputs[rec.JobID][stepID][rec.Name] = rec.Arg
	}
	msg := strings.TrimRight(rec.Msg, "\n")
	var shown string
	switch {
	case rec.RawOutput:
		res.Output[job] = append(res.Output[job], strings.Split(msg, "\n")...)
		shown = "| " + msg
	case rec.Level != "debug":
		shown = strings.TrimSpace(msg)
	}
	if shown == "" {
		return
	}
	res.Log[job] = append(res.Log[job], shown)
	if log != nil {
		log("[%s] %s", job, shown)
	}
}

func matrixString(m map[string]any) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s: %v", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func sortedPairs(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// Summary is one line per job and per step of the main stage, with its
// result: what the note quotes.
func (res *Result) Summary() string {
	var b strings.Builder
	jobs := make([]string, 0, len(res.Jobs))
	for j := range res.Jobs {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	for _, j := range jobs {
		fmt.Fprintf(&b, "job %s: %s\n", j, res.Jobs[j])
		for _, s := range res.Steps {
			// A composite action's own steps (ID "1/0") are left to it:
			// act names them as the action.
			if s.Job != j || strings.HasPrefix(s.ID, "--") || strings.Contains(s.ID, "/") {
				continue
			}
			fmt.Fprintf(&b, "  %-4s %-60s %s (%s)\n", s.Stage, short(s.Name, 60), s.Result, s.Duration.Round(time.Second/10))
		}
	}
	return b.String()
}

// Failures says, for each job that did not succeed, which steps failed
// and the last lines act showed of the job: what a reader needs when only the
// end of a long test log is kept (as CI keeps it).
func (res *Result) Failures(lines int) string {
	var b strings.Builder
	jobs := make([]string, 0, len(res.Jobs))
	for j, r := range res.Jobs {
		if r != "success" && r != "unsupported platform" {
			jobs = append(jobs, j)
		}
	}
	sort.Strings(jobs)
	for _, j := range jobs {
		fmt.Fprintf(&b, "job %s: %s\n", j, res.Jobs[j])
		for _, s := range res.Steps {
			if s.Job == j && s.Result != "success" && s.Result != "skipped" {
				fmt.Fprintf(&b, "  step %s (%s): %s\n", short(s.Name, 60), s.Stage, s.Result)
			}
		}
		out := res.Log[j]
		if len(out) > lines {
			out = out[len(out)-lines:]
		}
		fmt.Fprintf(&b, "  the last %d lines act showed of it:\n", len(out))
		for _, l := range out {
			fmt.Fprintf(&b, "    %s\n", l)
		}
		// Last, because CI keeps only the few lines before the test's
		// own FAIL: which Go tests failed in the job, and what the first
		// of them said last.
		if failed, said := goTestFailures(res.Output[j]); len(failed) > 0 {
			fmt.Fprintf(&b, "  go test in job %s: %d failed; the first one's last file:line lines:\n", j, len(failed))
			for _, l := range said {
				fmt.Fprintf(&b, "    %s\n", short(l, 200))
			}
			if len(failed) > 6 {
				failed = append(failed[:6], fmt.Sprintf("and %d more", len(failed)-6))
			}
			for _, l := range failed {
				fmt.Fprintf(&b, "    %s\n", short(l, 200))
			}
		}
	}
	return b.String()
}

// goTestLocation is how go test -v starts a test's log line: file:line.
// goTestFail is its line for a failed test, indented by the test's depth.
var (
	goTestLocation = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)
	goTestFail     = regexp.MustCompile(`^\s*--- FAIL: `)
)

// goTestFailures reads go test -v output: its "--- FAIL:" lines, and the
// last three file:line lines before the first of them, which for a test
// that stopped with t.Fatal end with what it said.
func goTestFailures(output []string) (failed, said []string) {
	var recent []string
	for _, l := range output {
		switch {
		case goTestFail.MatchString(l):
			if failed == nil {
				said = recent
			}
			failed = append(failed, strings.TrimSpace(l))
		case failed == nil && goTestLocation.MatchString(l):
			recent = append(recent, strings.TrimSpace(l))
			if len(recent) > 3 {
				recent = recent[1:]
			}
		}
	}
	return failed, said
}

func short(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
