package cmd

import (
	"os"
	"strings"
	"testing"
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
