package workflows

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Repo is a clone of hwk's repository that act runs workflows in, with a
// bare repository on disk as its origin (where a workflow's `git push`
// goes), a home directory of its own for Docker's client config and the
// kubeconfig (so that a step's docker login or an Action's kubeconfig
// never touches the user's), and the stand-ins.
type Repo struct {
	// Root holds everything below; Dir is the clone, Origin the bare
	// repository its origin remote is, Home holds the steps' .docker and
	// .kube.
	Root, Dir, Origin, Home string
	// Record is where stand-ins record what they were asked to do
	// (HWK_WORKFLOWS_RECORD).
	Record string
	// Source is the repository the clone was made from.
	Source string
	// PathDirs go before PATH: the stand-in programs, and what a test
	// adds (tools a GitHub runner image has).
	PathDirs []string
}

// standIns is this package's directory of stand-in actions and programs.
func standIns(source string) string { return filepath.Join(source, "hack", "workflows") }

// NewRepo clones source (a work tree of hwk's repository) under root,
// with the work tree's changes that are not committed yet committed in
// the clone, so that what runs is what is on disk.
func NewRepo(source, root string) (*Repo, error) {
	r := &Repo{Root: root, Dir: filepath.Join(root, "repo"), Origin: filepath.Join(root, "origin.git"),
		Home: filepath.Join(root, "home"), Record: filepath.Join(root, "record"), Source: source}
	for _, d := range []string{r.Home, r.Record} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	r.PathDirs = []string{filepath.Join(standIns(source), "bin")}
	if err := git(root, "clone", "--quiet", "--no-local", source, r.Dir); err != nil {
		return nil, err
	}
	if err := r.overlay(); err != nil {
		return nil, fmt.Errorf("copy the work tree's changes: %w", err)
	}
	if err := git(root, "clone", "--quiet", "--bare", r.Dir, r.Origin); err != nil {
		return nil, err
	}
	if err := git(r.Dir, "remote", "set-url", "origin", r.Origin); err != nil {
		return nil, err
	}
	return r, nil
}

// overlay makes the clone's files the source's work tree's: changed and
// new (not ignored) files copied, deleted ones removed; then commits
// them.
func (r *Repo) overlay() error {
	var paths []string
	for _, args := range [][]string{
		{"ls-files", "-z", "--cached", "--others", "--exclude-standard"},
		{"diff", "--name-only", "-z", "--diff-filter=D", "HEAD"},
	} {
		out, err := exec.Command("git", append([]string{"-C", r.Source}, args...)...).Output()
		if err != nil {
			return fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		for _, p := range bytes.Split(out, []byte{0}) {
			if len(p) > 0 {
				paths = append(paths, string(p))
			}
		}
	}
	changed := false
	for _, path := range paths {
		src, dst := filepath.Join(r.Source, path), filepath.Join(r.Dir, path)
		fi, err := os.Lstat(src)
		switch {
		case os.IsNotExist(err):
			if _, err := os.Lstat(dst); err == nil {
				changed = true
				if err := os.Remove(dst); err != nil {
					return err
				}
			}
			continue
		case err != nil:
			return err
		case !fi.Mode().IsRegular():
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
			if dfi, err := os.Stat(dst); err == nil && dfi.Mode().Perm() == fi.Mode().Perm() {
				continue
			}
		}
		changed = true
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, fi.Mode().Perm()); err != nil {
			return err
		}
		if err := os.Chmod(dst, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	if !changed {
		return nil
	}
	if err := git(r.Dir, "add", "-A"); err != nil {
		return err
	}
	// A mode git does not record (0444 against 0644) was copied, but
	// there is nothing to commit.
	if git(r.Dir, "diff", "--cached", "--quiet") == nil {
		return nil
	}
	return git(r.Dir, "-c", "user.name=hwk workflows", "-c", "user.email=workflows@hwk.invalid",
		"commit", "--quiet", "--no-verify", "-m", "workflows: the work tree's changes not yet committed")
}

// Env is the environment act runs in: the user's (so that Go's, npm's
// and hwk's caches stay warm), with PATH led by the stand-ins, and
// Docker's client config and the kubeconfig moved to the repository's
// own home, so that a step's docker login or an Action's kubeconfig
// never touches the user's.
func (r *Repo) Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "PATH", "KUBECONFIG", "DOCKER_CONFIG", "HWK_HOME", "TERM":
			continue
		case "HWK_ACT", "HWK_REQUIRE_WORKFLOWS", "HWK_BIN":
			// make workflows' own: ci.yml's unit job runs go test ./...,
			// which with them would run these tests again inside it.
			continue
		}
		env = append(env, kv)
	}
	// act runs host steps on a pseudo-terminal, where GitHub's runner
	// gives them pipes; TERM=dumb keeps spinners out of the log.
	env = append(env, "TERM=dumb", "HWK_WORKFLOWS_RECORD="+r.Record,
		"DOCKER_CONFIG="+filepath.Join(r.Home, ".docker"),
		"KUBECONFIG="+filepath.Join(r.Home, ".kube", "config"),
		"PATH="+strings.Join(append(slices.Clone(r.PathDirs), os.Getenv("PATH")), string(os.PathListSeparator)))
	return env
}

// workflowFile is the part of a workflow (or an action's action.yml)
// read here.
type workflowFile struct {
	Jobs map[string]struct {
		Outputs map[string]string `yaml:"outputs"`
		Steps   []stepYAML        `yaml:"steps"`
	} `yaml:"jobs"`
}

type stepYAML struct {
	ID   string            `yaml:"id"`
	Uses string            `yaml:"uses"`
	With map[string]string `yaml:"with"`
	Run  string            `yaml:"run"`
	Env  map[string]string `yaml:"env"`
	If   string            `yaml:"if"`
	Name string            `yaml:"name"`
}

func (r *Repo) readWorkflow(path string) (*workflowFile, error) {
	data, err := os.ReadFile(filepath.Join(r.Dir, path))
	if err != nil {
		return nil, err
	}
	var wf workflowFile
	if err := yaml.Unmarshal(data, &wf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &wf, nil
}

var usesRE = regexp.MustCompile(`^([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)(/[^@]*)?@(.+)$`)

// thisAction is how a workflow outside this repository names hwk's
// Action; it is run from the clone.
const thisAction = "hwk-dev/hwk"

// remoteUses lists the actions from other repositories the workflow
// uses, as OWNER/REPO@REF, and the path of the stand-in for each ("" for
// those act handles itself).
func (r *Repo) remoteUses(path string) (map[string]string, error) {
	wf, err := r.readWorkflow(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for job, j := range wf.Jobs {
		for i, s := range j.Steps {
			u := s.Uses
			switch {
			case u == "" || strings.HasPrefix(u, "./"):
				continue
			case strings.HasPrefix(u, "docker://"):
				return nil, fmt.Errorf("%s: job %s step %d uses %s: container actions cannot run offline here; write a stand-in action instead", path, job, i+1, u)
			}
			m := usesRE.FindStringSubmatch(u)
			if m == nil {
				return nil, fmt.Errorf("%s: job %s step %d: uses %q is not OWNER/REPO@REF", path, job, i+1, u)
			}
			key := m[1] + "/" + m[2] + "@" + m[4]
			switch {
			case m[1]+"/"+m[2] == "actions/checkout" && s.With["repository"] == "":
				// act copies the work tree instead of checking out this
				// repository ("Skipping local actions/checkout").
				out[key] = ""
			case m[1]+"/"+m[2] == thisAction:
				out[key] = r.Dir
			default:
				out[key] = filepath.Join(standIns(r.Source), "actions", m[1], m[2])
			}
		}
	}
	return out, nil
}

// localRepositories is act's --local-repository list for the workflow:
// each action it uses from another repository, mapped to its stand-in.
// It fails, naming the action, when one has no stand-in here: act would
// try to clone it from GitHub, which is not reachable, or worse skip it.
func (r *Repo) localRepositories(path string) ([]string, error) {
	uses, err := r.remoteUses(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, key := range slices.Sorted(maps.Keys(uses)) {
		dir := uses[key]
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "action.yml")); err != nil {
			return nil, fmt.Errorf("%s uses %s, which has no stand-in: write %s/action.yml (a composite action that does what the step needs here and says in its description what it stands for)", path, key, dir)
		}
		out = append(out, key+"="+dir)
	}
	return out, nil
}

func git(dir string, args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
