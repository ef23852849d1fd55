// Package ghaction runs a JavaScript GitHub Action's main and post steps
// the way GitHub's runner does, for tests: no GitHub runs here, so this is
// the strongest stand-in for it. What it reproduces, from actions/runner's
// source (src/Runner.Worker):
//
//   - inputs reach the step as INPUT_<NAME>, the name upper-cased with
//     spaces made underscores and hyphens kept (Handlers/Handler.cs,
//     AddInputsToEnvironment), every input the step was not given taking
//     its default from action.yml; an input action.yml does not declare is
//     refused (the runner warns "Unexpected input");
//   - the step runs `node FILE` in the workspace (NodeScriptActionHandler.cs)
//     and fails when node exits non-zero;
//   - GITHUB_OUTPUT, GITHUB_STATE, GITHUB_PATH, GITHUB_ENV and
//     GITHUB_STEP_SUMMARY are fresh empty files per step; outputs and
//     state are read afterwards as NAME=VALUE lines or NAME<<DELIMITER
//     blocks (FileCommandManager.cs), the path as lines, and what the main
//     step saved in GITHUB_STATE reaches the post step as STATE_<name>;
//   - the default context variables a step sees (GITHUB_ACTIONS,
//     GITHUB_WORKSPACE, RUNNER_TEMP, RUNNER_NAME, GITHUB_RUN_ID, ...).
//
// It does not evaluate expressions beyond the one action.yml defaults use
// here, ${{ github.token }}.
package ghaction

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// runnerName is the runner every step runs on.
const runnerName = "GitHub Actions 7"

// Metadata is what action.yml says that a run needs.
type Metadata struct {
	Inputs map[string]struct {
		Default  string `yaml:"default"`
		Required bool   `yaml:"required"`
	} `yaml:"inputs"`
	Runs struct {
		Using string `yaml:"using"`
		Main  string `yaml:"main"`
		Post  string `yaml:"post"`
	} `yaml:"runs"`
}

// Load reads DIR/action.yml.
func Load(dir string) (*Metadata, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "action.yml"))
	if err != nil {
		return nil, err
	}
	var m Metadata
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("action.yml: %w", err)
	}
	if !strings.HasPrefix(m.Runs.Using, "node") || m.Runs.Main == "" {
		return nil, fmt.Errorf("action.yml: runs.using %q with main %q is not a JavaScript action", m.Runs.Using, m.Runs.Main)
	}
	return &m, nil
}

// Job is one job's run of the action: its directory, the job's workspace
// and temporary directory, and what every step of it sees.
type Job struct {
	ActionDir string
	Workspace string
	Temp      string
	// Token is what ${{ github.token }} evaluates to.
	Token string
	// Env is added to the environment every step gets (after the runner's
	// own variables, so it can override them, e.g. GITHUB_API_URL).
	Env []string

	meta  *Metadata
	state map[string]string
}

// Step is what one step did.
type Step struct {
	Exit    int
	Output  string // stdout and stderr, interleaved
	Outputs map[string]string
	State   map[string]string
	Path    []string
}

// NewJob loads the action in dir for a job whose workspace and RUNNER_TEMP
// are made under root.
func NewJob(dir, root string) (*Job, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	m, err := Load(dir)
	if err != nil {
		return nil, err
	}
	j := &Job{ActionDir: dir, Workspace: filepath.Join(root, "workspace"), Temp: filepath.Join(root, "runner-temp"), meta: m}
	for _, d := range []string{j.Workspace, j.Temp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return j, nil
}

// Main runs the main step with the given inputs (the step's `with:`).
func (j *Job) Main(ctx context.Context, with map[string]string) (*Step, error) {
	s, err := j.run(ctx, "main", j.meta.Runs.Main, with, nil)
	if s != nil {
		j.state = s.State
	}
	return s, err
}

// Post runs the post step, with the state the main step saved; post-if is
// taken as true (hwk's is always()).
func (j *Job) Post(ctx context.Context, with map[string]string) (*Step, error) {
	if j.meta.Runs.Post == "" {
		return nil, fmt.Errorf("action.yml has no post step")
	}
	return j.run(ctx, "post", j.meta.Runs.Post, with, j.state)
}

func (j *Job) run(ctx context.Context, stage, file string, with, state map[string]string) (*Step, error) {
	env, err := j.inputs(with)
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	dir, err := os.MkdirTemp(j.Temp, "_runner_file_commands-")
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_PATH", "GITHUB_ENV", "GITHUB_STEP_SUMMARY"} {
		p := filepath.Join(dir, strings.ToLower(name))
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return nil, err
		}
		files[name] = p
		env = append(env, name+"="+p)
	}
	for k, v := range state {
		env = append(env, "STATE_"+k+"="+v)
	}
	env = append(env,
		"CI=true", "GITHUB_ACTIONS=true",
		"GITHUB_WORKSPACE="+j.Workspace, "RUNNER_TEMP="+j.Temp,
		"RUNNER_NAME="+runnerName, "RUNNER_OS=Linux", "RUNNER_ARCH=X64",
		"GITHUB_REPOSITORY=example/app", "GITHUB_RUN_ID=4242", "GITHUB_RUN_ATTEMPT=1",
		"GITHUB_JOB=test", "GITHUB_API_URL=https://api.github.com",
	)
	env = append(env, j.Env...)

	cmd := exec.CommandContext(ctx, "node", filepath.Join(j.ActionDir, file))
	cmd.Dir = j.Workspace
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	s := &Step{}
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			return nil, fmt.Errorf("%s step: %w", stage, err)
		}
		s.Exit = ee.ExitCode()
	}
	s.Output = out.String()
	if s.Outputs, err = readFileCommand(files["GITHUB_OUTPUT"]); err != nil {
		return s, err
	}
	if s.State, err = readFileCommand(files["GITHUB_STATE"]); err != nil {
		return s, err
	}
	raw, err := os.ReadFile(files["GITHUB_PATH"])
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if l != "" {
			s.Path = append(s.Path, l)
		}
	}
	return s, nil
}

// inputs is the INPUT_* environment for with, defaults filled in.
func (j *Job) inputs(with map[string]string) ([]string, error) {
	for k := range with {
		if _, ok := j.meta.Inputs[k]; !ok {
			return nil, fmt.Errorf("unexpected input %q: action.yml declares %s", k, strings.Join(j.inputNames(), ", "))
		}
	}
	var env []string
	for _, name := range j.inputNames() {
		in := j.meta.Inputs[name]
		v, given := with[name]
		if !given {
			if in.Required {
				return nil, fmt.Errorf("input %q is required", name)
			}
			v = in.Default
		}
		switch {
		case strings.TrimSpace(v) == "${{ github.token }}":
			v = j.Token
		case strings.Contains(v, "${{"):
			return nil, fmt.Errorf("input %q: ghaction evaluates no expression but ${{ github.token }}: %q", name, v)
		}
		env = append(env, "INPUT_"+strings.ToUpper(strings.ReplaceAll(name, " ", "_"))+"="+v)
	}
	return env, nil
}

func (j *Job) inputNames() []string {
	var names []string
	for k := range j.meta.Inputs {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// readFileCommand parses a GITHUB_OUTPUT-style file as the runner does:
// NAME=VALUE, or NAME<<DELIMITER, the value's lines, DELIMITER.
func readFileCommand(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	lines := strings.Split(string(raw), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if l == "" {
			continue
		}
		eq, hd := strings.Index(l, "="), strings.Index(l, "<<")
		switch {
		case eq >= 0 && (hd < 0 || eq < hd):
			if eq == 0 {
				return nil, fmt.Errorf("%s: %q has no name", filepath.Base(path), l)
			}
			out[l[:eq]] = l[eq+1:]
		case hd > 0 && len(l) > hd+2:
			name, delim := l[:hd], l[hd+2:]
			var value []string
			for i++; ; i++ {
				if i >= len(lines) {
					return nil, fmt.Errorf("%s: no delimiter %q after %s", filepath.Base(path), delim, name)
				}
				if lines[i] == delim {
					break
				}
				value = append(value, lines[i])
			}
			out[name] = strings.Join(value, "\n")
		default:
			return nil, fmt.Errorf("%s: %q is neither NAME=VALUE nor NAME<<DELIMITER", filepath.Base(path), l)
		}
	}
	return out, nil
}
