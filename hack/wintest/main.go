// Command wintest runs the tests of every package that builds for
// windows/amd64 under Wine 10 (make test-windows): each package's test
// binary is compiled with GOOS=windows, run in hack/wine.sh's root with
// its package directory as the working directory, and its results read
// through go tool test2json. It prints a table of packages and results
// and the number of test functions that ran.
//
// A failure is either fixed or listed in wineFailures (wine.go) with the
// Wine bug or reason that makes it Wine's and not Windows'; a listed
// failure is reported as such, never hidden, and a listed test that
// passes fails the run until it is taken off the list. Any other failure,
// a package whose binary does not build or start, or a run past
// -timeout fails the run.
//
// Needs root (hack/wine.sh chroots) and Go. Flags: -run narrows the
// packages (a regular expression of import paths relative to the module,
// e.g. 'pkg/state|drivers/.*'), -work keeps the binaries, prefix and logs
// in a directory of one's choosing.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hwk-dev/hwk/internal/testing/dockerrelay"
)

func main() {
	run := flag.String("run", "", "only the packages whose path relative to the module matches this regular expression")
	work := flag.String("work", "", "directory for the test binaries, the Wine prefix and the logs (default: a new one under /var/tmp, removed when every package passed)")
	timeout := flag.Duration("timeout", 10*time.Minute, "time limit of each package's test binary")
	flag.Parse()
	if err := mainErr(*run, *work, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "wintest:", err)
		os.Exit(1)
	}
}

func mainErr(run, work string, timeout time.Duration) error {
	var only *regexp.Regexp
	if run != "" {
		var err error
		if only, err = regexp.Compile("^(" + run + ")$"); err != nil {
			return fmt.Errorf("-run: %w", err)
		}
	}
	repo, err := os.Getwd()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(repo, "go.mod")); err != nil {
		return fmt.Errorf("run it from the module's root (make test-windows): %w", err)
	}
	pkgs, err := listPackages(repo, only)
	if err != nil {
		return err
	}
	if len(pkgs) == 0 {
		return fmt.Errorf("no package with tests matches -run %q", run)
	}
	keep := work != ""
	if work == "" {
		if work, err = os.MkdirTemp("/var/tmp", "hwk-wintest-"); err != nil {
			return err
		}
	}
	if work, err = filepath.Abs(work); err != nil {
		return err
	}
	for _, d := range []string{"bin", "logs"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			return err
		}
	}
	wine := filepath.Join(repo, "hack", "wine.sh")
	ctx := context.Background()

	start := time.Now()
	fmt.Printf("compiling %d packages' tests for windows/amd64 into %s\n", len(pkgs), filepath.Join(work, "bin"))
	compile(ctx, pkgs, work)
	fmt.Printf("compiled in %s\n", time.Since(start).Round(time.Second))

	prefix := filepath.Join(work, "prefix")
	if out, err := exec.CommandContext(ctx, wine, "prefix", prefix).CombinedOutput(); err != nil {
		return fmt.Errorf("make the Wine prefix: %w\n%s", err, out)
	}
	// Wine's powershell.exe is a stub that reads the commands of
	// -Command - and never answers (wine programs/powershell/main.c): a
	// command that checks the hyperv driver would wait out the session's
	// start limit (hyperv.StartTimeout) on it, each time. The tests' C:\
	// has none, as PowerShell that cannot run; tests of the PowerShell
	// paths put their fake first on PATH, and make e2e-wine keeps the
	// stub to show what hwk does with it.
	stub := filepath.Join(prefix, "drive_c", "windows", "system32", "WindowsPowerShell", "v1.0", "powershell.exe")
	if err := os.Remove(stub); err != nil {
		return fmt.Errorf("remove Wine's powershell.exe stub: %w", err)
	}
	relay, err := dockerrelay.Start()
	if err != nil {
		return err
	}
	if relay != nil {
		defer relay.Close()
		fmt.Printf("Docker engine for the tests: DOCKER_HOST=%s (a relay to %s)\n", relay.Host(), relay.Socket())
	}
	for _, p := range pkgs {
		if p.buildErr != "" {
			fmt.Printf("%-40s does not build for windows/amd64\n", p.rel)
			continue
		}
		runPackage(ctx, p, repo, work, prefix, wine, relay, timeout)
		fmt.Printf("%-40s %s\n", p.rel, p.status())
	}

	failed := report(os.Stdout, pkgs, time.Since(start))
	if failed {
		return fmt.Errorf("some Windows tests failed; the logs are in %s", filepath.Join(work, "logs"))
	}
	if !keep {
		return os.RemoveAll(work)
	}
	return nil
}

// pkg is one package's tests: what it is, and what its run gave.
type pkg struct {
	path, rel, dir string
	exe            string
	buildErr       string
	log            string

	tests    map[string]string // top-level test → pass, fail or skip
	results  map[string]string // every test and subtest → pass, fail or skip
	order    []string
	output   map[string][]string // top-level test → its output lines
	result   string              // the package's own: pass or fail
	elapsed  time.Duration
	runErr   string // the binary's exit or a timeout, when no test said why
	wine     []string
	stale    []string
	failures []string
}

func listPackages(repo string, only *regexp.Regexp) ([]*pkg, error) {
	cmd := exec.Command("go", "list", "-f", "{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}", "./...")
	cmd.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []*pkg
	for line := range strings.Lines(string(out)) {
		path, dir, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		rel, err := filepath.Rel(repo, dir)
		if err != nil {
			return nil, err
		}
		rel = filepath.ToSlash(rel)
		if only != nil && !only.MatchString(rel) {
			continue
		}
		pkgs = append(pkgs, &pkg{path: path, rel: rel, dir: dir})
	}
	return pkgs, nil
}

// compile builds every package's test binary, two at a time (the go
// command runs a link per package).
func compile(ctx context.Context, pkgs []*pkg, work string) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for _, p := range pkgs {
		name := strings.NewReplacer("/", "_", ".", "root").Replace(p.rel)
		p.exe = filepath.Join(work, "bin", name+".test.exe")
		p.log = filepath.Join(work, "logs", name+".log")
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cmd := exec.CommandContext(ctx, "go", "test", "-c", "-vet=off", "-o", p.exe, p.path)
			cmd.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				p.buildErr = fmt.Sprintf("%v: %s", err, out)
				return
			}
			if _, err := os.Stat(p.exe); err != nil {
				p.buildErr = "go test -c wrote no binary"
			}
		})
	}
	wg.Wait()
}

// event is one line of go tool test2json's output.
type event struct {
	Action  string
	Test    string
	Output  string
	Elapsed float64
}

// runPackage runs p's test binary under Wine and reads its results.
func runPackage(ctx context.Context, p *pkg, repo, work, prefix, wine string, relay *dockerrelay.Relay, timeout time.Duration) {
	p.tests, p.output, p.results = map[string]string{}, map[string][]string{}, map[string]string{}
	logf, err := os.Create(p.log)
	if err != nil {
		p.runErr = err.Error()
		return
	}
	defer logf.Close()

	// The outer limit lets the binary's own -test.timeout panic first,
	// with the goroutines that were stuck.
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, wine, "run", "-g", "-b", repo, "-b", work,
		"wine", p.exe, "-test.v=test2json", "-test.count=1", "-test.timeout="+timeout.String())
	cmd.Dir = p.dir
	cmd.Env = wineEnv(prefix, relay)
	conv := exec.CommandContext(ctx, "go", "tool", "test2json", "-p", p.path)
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = logf
	conv.Stdin = pr
	events, err := conv.StdoutPipe()
	if err != nil {
		p.runErr = err.Error()
		return
	}
	if err := conv.Start(); err != nil {
		p.runErr = err.Error()
		return
	}
	began := time.Now()
	runErr := cmd.Start()
	var done sync.WaitGroup
	if runErr == nil {
		done.Go(func() {
			runErr = cmd.Wait()
			pw.Close()
		})
	} else {
		pw.Close()
	}
	sc := bufio.NewScanner(events)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		top, _, _ := strings.Cut(e.Test, "/")
		switch {
		case e.Action == "output":
			logf.WriteString(e.Output)
			if top != "" {
				p.output[top] = append(p.output[top], e.Output)
			}
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail"):
			p.result = e.Action
		case e.Test != "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			p.results[e.Test] = e.Action
			if e.Test != top {
				continue
			}
			if _, ok := p.tests[top]; !ok {
				p.order = append(p.order, top)
			}
			p.tests[top] = e.Action
		}
	}
	done.Wait()
	conv.Wait()
	p.elapsed = time.Since(began)
	if ctx.Err() != nil {
		p.runErr = fmt.Sprintf("still running after %s: stopped", timeout+time.Minute)
	} else if runErr != nil && p.result != "fail" {
		p.runErr = fmt.Sprintf("the test binary under Wine: %v", runErr)
	}
	judge(p)
}

// wineEnv is the environment of a test binary under Wine: the prefix,
// Wine quiet, and the Docker engine when there is one; the tools that run
// there are required (HWK_REQUIRE_*), so that their tests fail instead of
// skipping.
func wineEnv(prefix string, relay *dockerrelay.Relay) []string {
	env := []string{
		"WINEPREFIX=" + prefix,
		"WINEDEBUG=-all",
		"HOME=/root",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C.UTF-8",
	}
	if relay != nil {
		env = append(env, "DOCKER_HOST="+relay.Host(), "HWK_REQUIRE_DOCKER=1")
	}
	// The registry's tests build it with Go for Windows (-g).
	return append(env, "HWK_REQUIRE_REGISTRY=1")
}

// judge sorts p's failures into fixed-or-not (failures) and Wine's (wine),
// and finds listed tests that pass (stale).
func judge(p *pkg) {
	for _, t := range p.order {
		switch p.tests[t] {
		case "fail":
			if wineOnly(p, t) {
				p.wine = append(p.wine, t)
			} else {
				p.failures = append(p.failures, t)
			}
		case "pass":
			if wineFailureFor(p.rel, t) != nil {
				p.stale = append(p.stale, t)
			}
		}
	}
	// A listed subtest that passes is stale too.
	for _, f := range wineFailures {
		if f.Package == p.rel && strings.Contains(f.Test, "/") && p.results[f.Test] == "pass" {
			p.stale = append(p.stale, f.Test)
		}
	}
	if p.result == "fail" && len(p.failures) == 0 && len(p.wine) == 0 && p.runErr == "" {
		p.runErr = "the package failed, and no test did"
	}
}

// wineOnly reports whether the failed top-level test t failed only for
// Wine's reasons: it is on the list, or each of its failed subtests that
// has no failed subtest of its own is.
func wineOnly(p *pkg, t string) bool {
	if wineFailureFor(p.rel, t) != nil {
		return true
	}
	var leaves []string
	for name, r := range p.results {
		if r != "fail" || !strings.HasPrefix(name, t+"/") {
			continue
		}
		leaf := true
		for other, r2 := range p.results {
			if r2 == "fail" && strings.HasPrefix(other, name+"/") {
				leaf = false
				break
			}
		}
		if leaf {
			leaves = append(leaves, name)
		}
	}
	for _, l := range leaves {
		if wineFailureFor(p.rel, l) == nil {
			return false
		}
	}
	return len(leaves) > 0
}

// wineReasons are the Wine list's reasons for t's failure: its own entry,
// or those of its failed subtests.
func wineReasons(p *pkg, t string) map[string][]string {
	out := map[string][]string{}
	if f := wineFailureFor(p.rel, t); f != nil {
		out[f.Why] = append(out[f.Why], t)
		return out
	}
	for name, r := range p.results {
		if f := wineFailureFor(p.rel, name); r == "fail" && f != nil && strings.HasPrefix(name, t+"/") {
			out[f.Why] = append(out[f.Why], name)
		}
	}
	return out
}

func (p *pkg) count(result string) int {
	n := 0
	for _, r := range p.tests {
		if r == result {
			n++
		}
	}
	return n
}

func (p *pkg) failed() bool {
	return p.buildErr != "" || p.runErr != "" || len(p.failures) > 0 || len(p.stale) > 0
}

func (p *pkg) status() string {
	switch {
	case p.buildErr != "":
		return "does not build"
	case p.runErr != "":
		return "FAIL: " + p.runErr
	case len(p.failures) > 0:
		return "FAIL: " + strings.Join(p.failures, ", ")
	case len(p.stale) > 0:
		return "FAIL: listed as Wine's but passed: " + strings.Join(p.stale, ", ")
	case len(p.wine) > 0:
		return fmt.Sprintf("ok (%d on the Wine list)", len(p.wine))
	}
	return "ok"
}

// report prints the table, every failure's output and every Wine-listed
// failure with its reason, and says whether the run failed.
func report(w io.Writer, pkgs []*pkg, took time.Duration) bool {
	fmt.Fprintf(w, "\n| package | tests run | passed | failed | Wine's | skipped | seconds | result |\n|---|---|---|---|---|---|---|---|\n")
	var ran, passed, skipped, wine int
	failed := false
	for _, p := range pkgs {
		pass, skip := p.count("pass"), p.count("skip")
		run := pass + p.count("fail")
		ran, passed, skipped, wine = ran+run, passed+pass, skipped+skip, wine+len(p.wine)
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %.1f | %s |\n", p.rel, run, pass, len(p.failures), len(p.wine), skip, p.elapsed.Seconds(), p.status())
		failed = failed || p.failed()
	}
	fmt.Fprintf(w, "\n%d packages; %d Windows test functions ran under Wine: %d passed, %d failed on the Wine list, %d failed otherwise; %d skipped (%s)\n",
		len(pkgs), ran, passed, wine, ran-passed-wine, skipped, took.Round(time.Second))

	byReason := map[string][]string{}
	for _, p := range pkgs {
		for _, t := range p.wine {
			for why, names := range wineReasons(p, t) {
				for _, n := range names {
					byReason[why] = append(byReason[why], p.rel+" "+n)
				}
			}
		}
	}
	if len(byReason) > 0 {
		fmt.Fprintln(w, "\nFailures that are Wine's, not Windows' (hack/wintest/wine.go):")
		reasons := slices.Sorted(func(yield func(string) bool) {
			for r := range byReason {
				if !yield(r) {
					return
				}
			}
		})
		for _, r := range reasons {
			fmt.Fprintf(w, "- %s\n  %s\n", strings.Join(byReason[r], ", "), r)
		}
	}
	for _, p := range pkgs {
		if p.buildErr != "" {
			fmt.Fprintf(w, "\n%s does not build for windows/amd64:\n%s\n", p.rel, p.buildErr)
		}
		for _, t := range p.failures {
			fmt.Fprintf(w, "\n--- %s %s failed under Wine:\n%s", p.rel, t, tail(p.output[t], 30))
		}
		if p.runErr != "" {
			fmt.Fprintf(w, "\n--- %s: %s (log: %s)\n", p.rel, p.runErr, p.log)
		}
	}
	return failed
}

func tail(lines []string, n int) string {
	if len(lines) > n {
		lines = append([]string{"...\n"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "")
}

// wineFailureFor is the Wine list's entry for a test, or nil.
func wineFailureFor(rel, test string) *wineFailure {
	for i, f := range wineFailures {
		if f.Package == rel && f.Test == test {
			return &wineFailures[i]
		}
	}
	return nil
}
