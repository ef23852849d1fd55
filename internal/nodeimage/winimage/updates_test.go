package winimage

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/format/isoimage"
	"github.com/hwk-dev/hwk/internal/testing/pssim"
)

// withUpdates returns inputs with update packages of these names, in this
// order.
func withUpdates(t *testing.T, names ...string) BuildInputs {
	t.Helper()
	in := inputs(t)
	dir := t.TempDir()
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte("MSCF update "+n), 0o644); err != nil {
			t.Fatal(err)
		}
		in.Updates = append(in.Updates, p)
	}
	return in
}

// dismCalls returns the packages DISM was asked to add, in order.
func dismCalls(m *pssim.Machine) []string {
	var out []string
	for _, l := range m.Log {
		if strings.HasPrefix(strings.ToLower(l), "dism.exe") && strings.Contains(strings.ToLower(l), "/add-package") {
			i := strings.Index(strings.ToLower(l), "/packagepath:")
			out = append(out, strings.Fields(l[i+len("/packagepath:"):])[0])
		}
	}
	return out
}

// TestProvisionInstallsUpdates checks that the updates on the build disk
// go in with DISM in build.json's order, each once; that after a 3010 the
// machine restarts and phase 1 goes on with the next; that a package that
// does not apply is reported and passed; and that phase 2 reports the
// revision Windows has after the restarts (review 4, D5).
func TestProvisionInstallsUpdates(t *testing.T) {
	in := withUpdates(t, "1-ssu.msu", "2-lcu.msu", "3-other-release.msu")
	m, err := provisioned(t, in, func(m *pssim.Machine) {
		m.Updates = map[string]*pssim.Update{
			"1-ssu.msu":           {UBR: 2700, NoRestart: true},
			"2-lcu.msu":           {UBR: 2762},
			"3-other-release.msu": {NotApplicable: true},
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	console := strings.Join(m.Console, "\n")
	if !m.Generalized || !strings.HasPrefix(m.Console[len(m.Console)-1], "hwk-provision: done:") {
		t.Fatalf("the build did not finish:\n%s", console)
	}
	want := []string{`C:\hwk\build\updates\1-ssu.msu`, `C:\hwk\build\updates\2-lcu.msu`, `C:\hwk\build\updates\3-other-release.msu`}
	if got := dismCalls(m); !slices.Equal(got, want) {
		t.Errorf("DISM was given %q, want %q", got, want)
	}
	if want := []string{"1-ssu.msu: 0", "2-lcu.msu: 3010", "3-other-release.msu: -2146498530"}; !slices.Equal(m.Packages, want) {
		t.Errorf("packages %q, want %q", m.Packages, want)
	}
	// The LCU's restart, then phase 1 again without copying the disk.
	restart := strings.Index(console, "update 2-lcu.msu installed; restarting to finish it")
	next := strings.Index(console, "installing update 3-other-release.msu")
	if restart < 0 || next < restart || strings.Count(console, "copying the build disk") != 1 {
		t.Errorf("no restart between the LCU and the next update, or the disk copied twice:\n%s", console)
	}
	for _, line := range []string{
		"hwk-provision: phase 1: update 1-ssu.msu installed",
		"hwk-provision: phase 1: update 3-other-release.msu does not apply to this Windows (0x800f081e, CBS_E_NOT_APPLICABLE); going on without it",
		"hwk-provision: phase 2: Windows Server 2022 build 20348.2762, Kubernetes v1.35.4",
	} {
		if !strings.Contains(console, line) {
			t.Errorf("the console lacks %q:\n%s", line, console)
		}
	}
	if m.UBR() != 2762 {
		t.Errorf("UBR %d, want 2762", m.UBR())
	}
}

// TestProvisionUnpatched checks that with no updates DISM adds nothing,
// and that phase 2 reports the ISO's own revision.
func TestProvisionUnpatched(t *testing.T) {
	m, err := provisioned(t, inputs(t), nil)
	if err != nil || !m.Generalized {
		t.Fatalf("%v; console %q", err, m.Console)
	}
	if calls := dismCalls(m); len(calls) != 0 {
		t.Errorf("DISM added %q", calls)
	}
	if !strings.Contains(strings.Join(m.Console, "\n"), "phase 2: Windows Server 2022 build 20348.169, ") {
		t.Errorf("console %q", m.Console)
	}
}

// TestProvisionUpdateFails checks that a DISM failure other than "not
// applicable" ends the build, printing the status and DISM's log, and that
// a missing servicing stack names the update to add.
func TestProvisionUpdateFails(t *testing.T) {
	for name, c := range map[string]struct {
		update pssim.Update
		want   string
	}{
		"unknown": {pssim.Update{Exit: -2146498529}, `FAILED: DISM could not install update lcu.msu (DISM's /add-package exited with status -2146498529); its log is C:\Windows\Logs\DISM\dism.log`},
		"no SSU":  {pssim.Update{Exit: -2146498525}, "needs a newer servicing stack first (0x800f0823, CBS_E_NEW_SERVICING_STACK_REQUIRED)"},
		// Review 6 (B1): a wrong download is not a patched image.
		"none applies": {pssim.Update{NotApplicable: true}, "FAILED: none of the updates given (--updates) applies to this Windows"},
	} {
		t.Run(name, func(t *testing.T) {
			u := c.update
			m, err := provisioned(t, withUpdates(t, "lcu.msu"), func(m *pssim.Machine) { m.Updates = map[string]*pssim.Update{"lcu.msu": &u} })
			if err != nil {
				t.Fatalf("the machine did not power off: %v", err)
			}
			console := strings.Join(m.Console, "\n")
			if m.Generalized || strings.Contains(console, "hwk-provision: done:") || !strings.Contains(console, c.want) {
				t.Errorf("console:\n%s\nwant %q", console, c.want)
			}
			if f := m.File(pssim.DISMLog); f == nil || !strings.Contains(string(f.Data), "lcu.msu") {
				t.Errorf("DISM's log: %+v", f)
			}
		})
	}
}

// TestBuildDiskUpdates checks that the updates go under updates\ with
// build.json naming them in order, and that a Catalog name longer than
// Joliet keeps is shortened on the disk, its own name kept in build.json.
func TestBuildDiskUpdates(t *testing.T) {
	long := "windows10.0-kb5044281-x64_3e6e7ab5d8b1b2b2c4b0c8b9d8e7a6b5c4d3e2f1.msu"
	in := withUpdates(t, "a.msu", long)
	image := filepath.Join(t.TempDir(), "build.iso")
	if err := BuildDisk(image, in); err != nil {
		t.Fatal(err)
	}
	_, files, err := isoimage.Read(image)
	if err != nil {
		t.Fatal(err)
	}
	short := UpdateFile(1, long)
	if len(short) > 64 || !strings.HasSuffix(short, "~2.msu") {
		t.Errorf("disk name %q", short)
	}
	for _, n := range []string{"updates/a.msu", "updates/" + short} {
		if !strings.HasPrefix(string(files[n]), "MSCF update ") {
			t.Errorf("%s holds %q", n, files[n])
		}
	}
	cfg := string(files["build.json"])
	if i, j := strings.Index(cfg, `"name": "a.msu"`), strings.Index(cfg, `"name": "`+long+`"`); i < 0 || j < i || !strings.Contains(cfg, `"file": "`+short+`"`) {
		t.Errorf("build.json:\n%s", cfg)
	}
	if UpdateFile(0, "a.msu") != "a.msu" {
		t.Error("a short name is changed")
	}
}
