// Package pscheck lets tests check the syntax of the PowerShell hwk runs on
// Windows nodes, with the tree-sitter PowerShell grammar in hack/pscheck
// (`npm ci --prefix hack/pscheck` installs it). No PowerShell runs here:
// this catches syntax, not wrong cmdlets or parameters.
package pscheck

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// checker is the directory of the checker, or "" after t is skipped or
// failed for want of it.
func checker(t testing.TB) string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(self), "..", "..", "..", "hack", "pscheck")
	_, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "tree-sitter-powershell")); err != nil || nodeErr != nil {
		if os.Getenv("HWK_REQUIRE_PSCHECK") == "1" {
			t.Fatalf("the PowerShell checker is not installed (npm ci --prefix hack/pscheck): %v %v", err, nodeErr)
		}
		t.Skip("the PowerShell checker is not installed (npm ci --prefix hack/pscheck)")
	}
	return dir
}

// write puts each script in a file of its name in a temporary directory
// and returns the files, in name order.
func write(t testing.TB, scripts map[string]string) []string {
	t.Helper()
	dir := t.TempDir()
	names := make([]string, 0, len(scripts))
	for name := range scripts {
		names = append(names, name)
	}
	sort.Strings(names)
	var files []string
	for _, name := range names {
		p := filepath.Join(dir, fileName(name))
		if err := os.WriteFile(p, []byte(scripts[name]), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	return files
}

// fileName is a script's name as a file name.
func fileName(name string) string { return strings.NewReplacer("/", "_", "\\", "_").Replace(name) }

// Check parses each script (by name) and fails t on a syntax error. It
// also checks that the checker flags a broken script, so a checker that
// passes everything cannot pass for a working one. Without the checker
// it skips t, or fails it when HWK_REQUIRE_PSCHECK=1.
func Check(t testing.TB, scripts map[string]string) {
	t.Helper()
	dir := checker(t)
	check := func(files ...string) (string, error) {
		out, err := exec.Command("node", append([]string{"--no-deprecation", filepath.Join(dir, "check.mjs")}, files...)...).Output()
		return string(out), err
	}
	if out, err := check(write(t, scripts)...); err != nil {
		t.Errorf("PowerShell syntax errors:\n%s", out)
	}
	broken := write(t, map[string]string{"broken.ps1": "if ($x) {\n  Write-Output 'open'\n"})
	if out, err := check(broken...); err == nil {
		t.Errorf("the checker passed a script with an unclosed block:\n%s", out)
	}
}

// Command is a command word a script invokes.
type Command struct {
	// Name is the word as written: a cmdlet's name, module-qualified or
	// not, a program's, or after & or . an expression (a quoted path, a
	// variable, a script block).
	Name string `json:"name"`
	Expr bool   `json:"expr"`
	// EAP is the $ErrorActionPreference the script has set where the
	// command runs ("Stop", "Continue"...), as far as literal assignments
	// tell: from the point of the assignment to the end of its scope (the
	// script, a function, a script block), a block handed to one of the
	// script's functions taking the preference that function sets. ""
	// when the script sets none.
	EAP string `json:"eap"`
}

// Invocations are the commands a script invokes and the functions it
// defines, as the grammar parses them.
type Invocations struct {
	Commands  []Command `json:"commands"`
	Functions []string  `json:"functions"`
}

// Commands parses each script (by name) and returns what it invokes.
// Without the checker it skips t, or fails it when HWK_REQUIRE_PSCHECK=1.
func Commands(t testing.TB, scripts map[string]string) map[string]Invocations {
	t.Helper()
	dir := checker(t)
	files := write(t, scripts)
	out, err := exec.Command("node", append([]string{"--no-deprecation", filepath.Join(dir, "check.mjs"), "--commands"}, files...)...).Output()
	if err != nil {
		t.Fatalf("list the scripts' commands: %v", err)
	}
	byFile := map[string]string{}
	for name := range scripts {
		byFile[fileName(name)] = name
	}
	got := map[string]Invocations{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var line struct {
			File string `json:"file"`
			Invocations
		}
		if err := dec.Decode(&line); err != nil {
			t.Fatalf("the checker's command list: %v", err)
		}
		got[byFile[filepath.Base(line.File)]] = line.Invocations
	}
	if len(got) != len(scripts) {
		t.Fatalf("the checker listed %d of %d scripts", len(got), len(scripts))
	}
	return got
}
