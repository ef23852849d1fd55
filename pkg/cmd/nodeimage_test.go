package cmd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/pkg/state"
)

// TestNodeImageBadInput: every mistake is named with its fix, and nothing
// is written to the cache.
func TestNodeImageBadInput(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"node-image", "build", "windows"}, "name the node OS to build: 'hwk node-image build linux'"},
		{[]string{"node-image", "build"}, "name the node OS to build"},
		{[]string{"node-image", "build", "linux", "--source", "git"}, `--source "git" is not known; use release`},
		{[]string{"node-image", "build", "linux", "--formats", "docker,iso"}, `--formats: "iso" is not a format; use docker, tar, qcow2, vhdx, vdi`},
		{[]string{"node-image", "build", "linux", "--formats", ","}, "--formats is empty"},
		{[]string{"node-image", "build", "linux", "--kubernetes-version", "latest"}, `--kubernetes-version "latest" is not a Kubernetes release`},
		{[]string{"node-image", "list", "-o", "xml"}, `--output "xml" is not supported`},
	} {
		code, _, stderr := run(t, tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("hwk %s: exit %d, stderr %q; want exit 1 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("bad input wrote to HWK_HOME: %v", entries)
	}
}

func TestNodeImageListEmpty(t *testing.T) {
	t.Setenv("HWK_HOME", t.TempDir())
	code, stdout, _ := run(t, "node-image", "list")
	if code != 0 || !strings.Contains(stdout, "No node images yet; build one with: sudo hwk node-image build linux") {
		t.Errorf("list: exit %d, %q", code, stdout)
	}
	code, stdout, _ = run(t, "node-image", "list", "-o", "json")
	if code != 0 || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("list -o json: exit %d, %q", code, stdout)
	}
}

// TestNodeImageListWindows: a Windows node image is listed with its
// version, and its Administrator password is never printed.
func TestNodeImageListWindows(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	cache := state.DefaultDirs().Cache
	for name, m := range map[string]string{
		"linux-v1.35.4-source-aaaa": `{"name":"linux-v1.35.4-source-aaaa","os":"linux","kubernetesVersion":"v1.35.4","source":"source","built":"2026-11-20T10:00:00Z","artifacts":{}}`,
		"windows-2022-v1.35.4-bbbb": `{"name":"windows-2022-v1.35.4-bbbb","os":"windows","kubernetesVersion":"v1.35.4","source":"release","built":"2026-11-21T10:00:00Z","artifacts":{},` +
			`"windows":{"version":"2022","edition":"Windows Server 2022 Datacenter Evaluation","build":20348,"isoSHA256":"abc","adminPassword":"Secret-Passw0rd#1"}}`,
	} {
		dir := filepath.Join(cache, "node-images", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(m), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := run(t, "node-image", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^windows-2022-v1.35.4-bbbb\s+windows 2022\s+v1.35.4`).MatchString(stdout) ||
		!regexp.MustCompile(`(?m)^linux-v1.35.4-source-aaaa\s+linux\s+v1.35.4`).MatchString(stdout) {
		t.Errorf("list: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, format := range []string{"json", "yaml"} {
		code, stdout, _ = run(t, "node-image", "list", "-o", format)
		if code != 0 || strings.Contains(stdout, "Secret-Passw0rd") || !strings.Contains(stdout, "Windows Server 2022 Datacenter Evaluation") {
			t.Errorf("list -o %s: exit %d, password shown or edition missing:\n%s", format, code, stdout)
		}
	}
}
