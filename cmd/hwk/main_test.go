package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinary builds the real hwk and checks what a shell sees: exit codes
// and the version stamped at link time.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := buildHwk(t)

	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.Contains(string(out), "hwk v9.9.9-test") || !strings.Contains(string(out), "commit:   abc123") {
		t.Errorf("version: %v\n%s", err, out)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("apiVersion: hwk.dev/v1alpha1\nkind: Cluster\nnodes:\n- role: control-plane\n  cpus: 1\n  memory: 3x\n  os: windows\n"), 0o600)
	cmd := exec.Command(bin, "config", "validate", "--config", bad)
	cmd.Env = append(os.Environ(), "HWK_HOME="+dir)
	stderr, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("want exit status 1, got %v\n%s", err, stderr)
	}
	if !strings.Contains(string(stderr), "has 3 problems") {
		t.Errorf("stderr:\n%s", stderr)
	}
	// Validation writes nothing anywhere.
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "bad.yaml" {
		t.Errorf("validate left files behind: %v", entries)
	}
}
