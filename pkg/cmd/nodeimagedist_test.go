package cmd

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/nodeimage/imagedist"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// TestNodeImageDistBadInput checks that pull, push, save, load and up's
// --pull name each mistake with its fix and write nothing.
func TestNodeImageDistBadInput(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	// The system's own words for a missing file: "no such file or
	// directory" on Linux, "The system cannot find the file specified."
	// on Windows (ERROR_FILE_NOT_FOUND).
	missing := filepath.Join(home, "none.tar")
	_, err := os.Stat(missing)
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of a missing file: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"node-image", "pull", "v1.35.4", "--formats", "iso"}, `--formats: "iso" is not a node image format; use docker, tar, qcow2, vhdx, vdi`},
		{[]string{"node-image", "pull", "registry.example.com/hwk/node"}, `"registry.example.com/hwk/node" names no tag or digest`},
		{[]string{"node-image", "pull", "v1.35.4", "--registry", "https://mirror.example.com"}, `--registry: "https://mirror.example.com" has a scheme`},
		{[]string{"node-image", "pull", "registry.example.com/hwk/node:v1", "--registry", "mirror.example.com"}, "--registry applies to a pinned version, not to a reference"},
		{[]string{"node-image", "pull", "v1.33.1"}, "pins no published node image for Kubernetes v1.33.1"},
		{[]string{"node-image", "push"}, "accepts 1 arg(s), received 0"},
		{[]string{"node-image", "push", "registry.example.com/hwk/node:v1.35.4"}, "no cached linux node image for Kubernetes v1.35.4 (the cache holds no node images)"},
		{[]string{"node-image", "save"}, "name the archive to write with -o FILE"},
		{[]string{"node-image", "save", "-o", "x.tar", "some-image"}, `no cached node image is called "some-image"`},
		{[]string{"node-image", "load"}, "name the archive to read with -i FILE"},
		{[]string{"node-image", "load", "-i", missing}, pe.Err.Error()},
		{[]string{"up", "--pull", "sometimes"}, `--pull "sometimes" is not a pull policy; use missing (default), always or never`},
		{[]string{"config", "validate", "--image", "registry.example.com/hwk/node"}, `"registry.example.com/hwk/node" names no tag or digest`},
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

// TestNodeImageWindowsSaveLoad checks that a Windows image saves and loads
// like any (a team's own file), with the licence reminder each way, and its
// Administrator password stays on the machine that built it.
func TestNodeImageWindowsSaveLoad(t *testing.T) {
	src := t.TempDir()
	t.Setenv("HWK_HOME", src)
	disk := make([]byte, 256<<10)
	rand.Read(disk)
	sum := sha256.Sum256(disk)
	m := &nodeimage.Manifest{
		Name: "windows-2022-v1.35.4-cccc", OS: "windows", KubernetesVersion: "v1.35.4", Source: nodeimage.Release,
		Key: strings.Repeat("c", 64), Built: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
		Windows: &nodeimage.Windows{Version: "2022", Edition: "Windows Server 2022 Datacenter", Build: 20348, ISOSHA256: "abc", AdminPassword: "Secret-Passw0rd#1"},
		Artifacts: map[nodeimage.Format]nodeimage.Artifact{
			nodeimage.FormatVHDX: {Path: "disk.vhdx", SHA256: hex.EncodeToString(sum[:]), Size: int64(len(disk))},
		},
	}
	m.Dir = filepath.Join(nodeimage.ImagesDir(state.DefaultDirs().Cache), m.Name)
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.FilePath(nodeimage.FormatVHDX), disk, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Write(); err != nil {
		t.Fatal(err)
	}

	archive := filepath.Join(t.TempDir(), "win.tar")
	code, stdout, stderr := run(t, "node-image", "save", "-o", archive, m.Name)
	if code != 0 || !strings.Contains(stdout, "Saved "+m.Name+" (vhdx ") || !strings.Contains(stderr, "Reminder: "+imagedist.WindowsLicence) {
		t.Fatalf("save: exit %d\n%s%s", code, stdout, stderr)
	}
	data, err := os.ReadFile(archive)
	if err != nil || strings.Contains(string(data), "Secret-Passw0rd") {
		t.Errorf("the archive holds the Administrator password (%v)", err)
	}

	t.Setenv("HWK_HOME", t.TempDir())
	code, stdout, stderr = run(t, "node-image", "load", "-i", archive, "--formats", "vhdx")
	if code != 0 || !strings.Contains(stderr, "Reminder: "+imagedist.WindowsLicence) || !strings.Contains(stdout, "Node image "+m.Name+" ready") {
		t.Fatalf("load: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = run(t, "node-image", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^`+m.Name+`\s+windows 2022\s+v1.35.4\s+release\s+vhdx\s+256 KiB\s+`).MatchString(stdout) {
		t.Errorf("list after load: exit %d\n%s", code, stdout)
	}
	loaded, err := os.ReadFile(filepath.Join(nodeimage.ImagesDir(state.DefaultDirs().Cache), m.Name, "disk.vhdx"))
	if err != nil || string(loaded) != string(disk) {
		t.Errorf("loaded disk differs (%v)", err)
	}

	code, _, stderr = run(t, "node-image", "load", "-i", archive, "--formats", "qcow2")
	if code != 1 || !strings.Contains(stderr, "has no qcow2 format (it has vhdx)") {
		t.Errorf("load of a format the archive lacks: exit %d\n%s", code, stderr)
	}

	// Loaded back where it was built, it keeps the password it had there.
	t.Setenv("HWK_HOME", src)
	if code, _, stderr = run(t, "node-image", "load", "-i", archive, "--formats", "vhdx"); code != 0 {
		t.Fatalf("load where it was built: %s", stderr)
	}
	back, err := nodeimage.ReadManifest(m.Dir)
	if err != nil || back.Windows == nil || back.Windows.AdminPassword != "Secret-Passw0rd#1" {
		t.Errorf("the builder's manifest lost its password: %+v %v", back, err)
	}
}
