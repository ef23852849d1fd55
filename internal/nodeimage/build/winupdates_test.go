package build

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/pssim"
	"github.com/hwk-dev/hwk/internal/testing/winimagetest"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// TestProvisionFacts checks that the revision and the updates installed
// are read from provision.ps1's console lines, each update once however
// often the phase ran.
func TestProvisionFacts(t *testing.T) {
	console := filepath.Join(t.TempDir(), "console.log")
	lines := strings.Join([]string{
		"hwk-provision: phase 1: installing update lcu.msu",
		"hwk-provision: phase 1: update lcu.msu installed; restarting to finish it",
		"hwk-provision: phase 1: update other.msu does not apply to this Windows (0x800f081e, CBS_E_NOT_APPLICABLE); going on without it",
		"hwk-provision: phase 1: update lcu.msu installed",
		"hwk-provision: phase 2: Windows Server 2022 build 20348.2762, Kubernetes v1.35.4, containerd v2.3.1",
		"hwk-provision: done: sysprep generalized the disk; powering off",
	}, "\r\n") + "\r\n"
	if err := os.WriteFile(console, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	facts, err := provisionResult(console)
	if err != nil || facts.ubr != 2762 || !slices.Equal(facts.updates, []string{"lcu.msu"}) {
		t.Errorf("facts %+v, %v", facts, err)
	}
}

// TestBuildWindowsUpdates checks that --updates' packages go onto the
// build disk and into the model Windows, that the manifest records the
// revision Windows reported after them and the updates that went in (not
// the one that did not apply), and that other update contents are another
// image (review 4, D5).
func TestBuildWindowsUpdates(t *testing.T) {
	fx := newWindowsFixture(t)
	build := func(dir string) *nodeimage.Manifest {
		t.Helper()
		m := pssim.NewServer2022()
		m.Updates = map[string]*pssim.Update{"lcu.msu": {UBR: 2762}, "other.msu": {NotApplicable: true}}
		opts := fx.opts
		opts.Formats = []nodeimage.Format{nodeimage.FormatQCOW2}
		opts.Updates = dir
		opts.Installer = &fakeInstaller{t: t, windows: m}
		man, err := BuildWindows(context.Background(), opts)
		if err != nil {
			t.Fatalf("%v\nconsole:\n%s", err, strings.Join(m.Console, "\n"))
		}
		return man
	}
	dir := winimagetest.UpdatesDir(t, "lcu.msu", "other.msu")
	m := build(dir)
	if m.Windows.UBR != 2762 || !slices.Equal(m.Windows.Updates, []string{"lcu.msu"}) || !strings.Contains(m.Components["windows"], "(build 20348.2762)") {
		t.Errorf("manifest windows %+v, components %v", m.Windows, m.Components)
	}
	read, err := nodeimage.ReadManifest(m.Dir)
	if err != nil || read.Windows.UBR != 2762 || !slices.Equal(read.Windows.Updates, []string{"lcu.msu"}) {
		t.Errorf("manifest.json: %+v, %v", read.Windows, err)
	}

	if err := os.WriteFile(filepath.Join(dir, "lcu.msu"), []byte("MSCF a later lcu.msu"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m2 := build(dir); m2.Name == m.Name {
		t.Errorf("another update's content is the same image %s", m.Name)
	}
	if m3 := build(""); m3.Name == m.Name || m3.Windows.UBR != 169 || len(m3.Windows.Updates) != 0 {
		t.Errorf("without updates: %s, %+v", m3.Name, m3.Windows)
	}
}
