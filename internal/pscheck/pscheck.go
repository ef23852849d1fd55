// Package pscheck lets tests check the syntax of the PowerShell hwk runs on
// Windows nodes, with the tree-sitter PowerShell grammar in hack/pscheck
// (`npm ci --prefix hack/pscheck` installs it). No PowerShell runs here:
// this catches syntax, not wrong cmdlets or parameters.
package pscheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
)

// Check parses each script (by name) and fails t on a syntax error. It
// also checks that the checker flags a broken script, so a checker that
// passes everything cannot pass for a working one. Without the checker
// it skips t, or fails it when HWK_REQUIRE_PSCHECK=1.
func Check(t testing.TB, scripts map[string]string) {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	checker := filepath.Join(filepath.Dir(self), "..", "..", "hack", "pscheck")
	_, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(filepath.Join(checker, "node_modules", "tree-sitter-powershell")); err != nil || nodeErr != nil {
		if os.Getenv("HWK_REQUIRE_PSCHECK") == "1" {
			t.Fatalf("the PowerShell checker is not installed (npm ci --prefix hack/pscheck): %v %v", err, nodeErr)
		}
		t.Skip("the PowerShell checker is not installed (npm ci --prefix hack/pscheck)")
	}
	dir := t.TempDir()
	names := make([]string, 0, len(scripts))
	for name := range scripts {
		names = append(names, name)
	}
	sort.Strings(names)
	var files []string
	for _, name := range names {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(scripts[name]), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	check := func(files ...string) (string, error) {
		out, err := exec.Command("node", append([]string{"--no-deprecation", filepath.Join(checker, "check.mjs")}, files...)...).Output()
		return string(out), err
	}
	if out, err := check(files...); err != nil {
		t.Errorf("PowerShell syntax errors:\n%s", out)
	}
	broken := filepath.Join(dir, "broken.ps1")
	if err := os.WriteFile(broken, []byte("if ($x) {\n  Write-Output 'open'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := check(broken); err == nil {
		t.Errorf("the checker passed a script with an unclosed block:\n%s", out)
	}
}
