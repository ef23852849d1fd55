package cmd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/state"
)

// TestNodeImageBuildWindowsUpdatesFlag checks that a bad --updates is named
// with its fix before anything is made.
func TestNodeImageBuildWindowsUpdatesFlag(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	empty := t.TempDir()
	spaced := t.TempDir()
	if err := os.WriteFile(filepath.Join(spaced, "my lcu.msu"), []byte("MSCF"), 0o644); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{
		"/nonexistent-updates": "--updates /nonexistent-updates: ",
		empty:                  "holds no .msu or .cab file: download the latest cumulative update",
		spaced:                 `--updates: "my lcu.msu" is not a name hwk can pass to DISM`,
	} {
		code, _, stderr := run(t, "node-image", "build", "windows", "--iso", "/nonexistent.iso", "--openssh", "/nonexistent.zip", "--updates", dir)
		if code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("--updates %s: exit %d, stderr %q; want %q", dir, code, stderr, want)
		}
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("bad input wrote to HWK_HOME: %v", entries)
	}
}

// TestNodeImageListWindowsBuild checks that the list shows a Windows image's
// build and revision (its patch level), and -o json its updates.
func TestNodeImageListWindowsBuild(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	dir := filepath.Join(state.DefaultDirs().Cache, "node-images", "windows-2022-v1.35.4-cccc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := `{"name":"windows-2022-v1.35.4-cccc","os":"windows","kubernetesVersion":"v1.35.4","source":"release","built":"2026-11-21T10:00:00Z","artifacts":{},` +
		`"windows":{"version":"2022","edition":"Windows Server 2022 SERVERDATACENTERCORE","build":20348,"isoSHA256":"abc","ubr":2762,"updates":["windows10.0-kb5044281-x64.msu"]}}`
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(m), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, "node-image", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^windows-2022-v1.35.4-cccc\s+windows 2022\s+v1.35.4\s.*windows 20348\.2762`).MatchString(stdout) {
		t.Errorf("list: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = run(t, "node-image", "list", "-o", "json")
	if code != 0 || !strings.Contains(stdout, `"ubr": 2762`) || !strings.Contains(stdout, "windows10.0-kb5044281-x64.msu") {
		t.Errorf("list -o json: exit %d\n%s", code, stdout)
	}
}
