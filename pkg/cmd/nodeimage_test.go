package cmd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/state"
)

// TestNodeImageBadInput checks that every mistake is named with its fix, and
// nothing is written to the cache.
func TestNodeImageBadInput(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"node-image", "build"}, "name the node OS to build: 'hwk node-image build linux' or 'hwk node-image build windows --iso PATH'"},
		{[]string{"node-image", "build", "solaris"}, `unknown command "solaris"`},
		{[]string{"node-image", "build", "windows"}, "--iso is required: a Windows Server 2022 or 2025 ISO"},
		{[]string{"node-image", "build", "windows", "--iso", "/nonexistent.iso", "--version", "2019"}, `--version "2019": use 2022 or 2025`},
		{[]string{"node-image", "build", "windows", "--iso", "/nonexistent.iso"}, "--openssh is required for Windows Server 2022"},
		{[]string{"node-image", "build", "windows", "--iso", "/nonexistent.iso", "--formats", "docker"}, `"docker" is not one of qcow2, vhdx, vdi`},
		{[]string{"node-image", "build", "windows", "--iso", "/x.iso", "--memory-mib", "512"}, "--memory-mib 512: Windows Setup needs at least 2048"},
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

// TestNodeImageBuildDryRun checks that --dry-run lists every component,
// where it would come from and its cache directory, and the node image, and
// makes nothing; a component made before shows as cached.
func TestNodeImageBuildDryRun(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	code, stdout, stderr := run(t, "node-image", "build", "linux", "--source", "release", "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "PART") || !strings.HasPrefix(lines[len(lines)-1], "node image linux-v") {
		t.Fatalf("plan:\n%s", stdout)
	}
	build := filepath.Join(state.DefaultDirs().Cache, "build")
	var runc string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if f[0] == "runc" {
			runc = f[len(f)-1]
			if f[2] != "release" || f[3] != "no" || filepath.Dir(runc) != build {
				t.Errorf("runc: %q", l)
			}
		}
	}
	if runc == "" {
		t.Fatalf("no runc in the plan:\n%s", stdout)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("a dry run wrote to HWK_HOME: %v", entries)
	}
	if err := os.MkdirAll(runc, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runc, ".done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stdout, _ = run(t, "node-image", "build", "linux", "--source", "release", "--dry-run")
	if !regexp.MustCompile(`(?m)^runc +v\S+ +release +yes +`).MatchString(stdout) {
		t.Errorf("runc is cached now:\n%s", stdout)
	}
}

func TestNodeImageListEmpty(t *testing.T) {
	t.Setenv("HWK_HOME", t.TempDir())
	code, stdout, _ := run(t, "node-image", "list")
	if code != 0 || !strings.Contains(stdout, "No node images yet; build one with: hwk node-image build linux") {
		t.Errorf("list: exit %d, %q", code, stdout)
	}
	code, stdout, _ = run(t, "node-image", "list", "-o", "json")
	if code != 0 || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("list -o json: exit %d, %q", code, stdout)
	}
}

// TestNodeImageListWindows checks that a Windows node image is listed with
// its version, and its Administrator password is never printed.
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

// TestNodeImageBuildWindowsDriver checks that the install runs on a driver
// that can install; another is refused by name before anything is built.
func TestNodeImageBuildWindowsDriver(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	dir := t.TempDir()
	iso, zip, programs := filepath.Join(dir, "server.iso"), filepath.Join(dir, "OpenSSH-Win64.zip"), filepath.Join(dir, "windows-amd64")
	os.MkdirAll(programs, 0o755)
	for _, p := range []string{iso, zip, filepath.Join(programs, "hwk-seed.exe"), filepath.Join(programs, "hwk-kubelet.exe")} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr := run(t, "node-image", "build", "windows", "--iso", iso, "--openssh", zip, "--programs", programs, "--driver", "docker")
	if code != 1 || !strings.Contains(stderr, "--driver docker cannot install Windows images") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = run(t, "node-image", "build", "windows", "--iso", iso, "--openssh", zip, "--programs", programs, "--driver", "bhyve")
	if code != 1 || !strings.Contains(stderr, "--driver: ") {
		t.Errorf("unknown driver: exit %d, stderr %q", code, stderr)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("a refused build wrote to HWK_HOME: %v", entries)
	}
}
