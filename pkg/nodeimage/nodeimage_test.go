package nodeimage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts  Options
		error string
	}{
		{Options{KubernetesVersion: "1.35", Source: Release, Formats: []Format{FormatTar}, CacheDir: "x"}, `"1.35" is not a Kubernetes release`},
		{Options{KubernetesVersion: "v1.35.4", Source: "git", Formats: []Format{FormatTar}, CacheDir: "x"}, `--source "git" is not known`},
		{Options{KubernetesVersion: "v1.35.4", Source: Release, CacheDir: "x"}, "--formats is empty"},
		{Options{KubernetesVersion: "v1.35.4", Source: Release, Formats: []Format{"iso"}, CacheDir: "x"}, `"iso" is not a format; use docker, tar, qcow2, vhdx, vdi`},
	} {
		err := tc.opts.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.error) {
			t.Errorf("validate(%+v) = %v, want %q", tc.opts, err, tc.error)
		}
	}
}

func TestListSkipsUnfinished(t *testing.T) {
	cache := t.TempDir()
	for i, n := range []string{"linux-a", "linux-b"} {
		m := &Manifest{Dir: filepath.Join(cache, "node-images", n), Name: n, Built: time.Date(2026, 1, i+1, 0, 0, 0, 0, time.UTC),
			Artifacts: map[Format]Artifact{FormatTar: {Path: "rootfs.tar.gz", Size: 10}}}
		os.MkdirAll(m.Dir, 0o755)
		if err := m.Write(); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(cache, "node-images", "linux-unfinished"), 0o755)
	list, err := List(cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "linux-b" || list[1].Size() != 10 {
		t.Fatalf("List = %+v", list)
	}
	if l, err := List(filepath.Join(cache, "none")); err != nil || l != nil {
		t.Errorf("List of an empty cache = %v, %v", l, err)
	}
}
