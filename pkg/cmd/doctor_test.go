package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/doctor"
)

// TestDoctorChecksTheNamedCluster checks that doctor --name of a cluster
// that exists checks that cluster as recorded (here: one Linux node on
// docker), not the default config (libvirt and a Windows worker), and for
// a name with no cluster reports that it checks what up would make.
func TestDoctorChecksTheNamedCluster(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	t.Setenv("KUBECONFIG", filepath.Join(home, "kubeconfig"))
	code, rec, stderr := run(t, "config", "validate", "--name", "mine", "--driver", "docker", "--windows-workers", "0", "--linux-workers", "0")
	if code != 0 {
		t.Fatalf("config validate: %s", stderr)
	}
	dir := filepath.Join(home, "data", "clusters", "mine")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string]string{"cluster.yaml": rec, ".hwk-cluster": "mine\n"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	checks := func(args ...string) map[string]doctor.Check {
		t.Helper()
		_, stdout, stderr := run(t, append([]string{"doctor", "-o", "json"}, args...)...)
		var list []doctor.Check
		if err := json.Unmarshal([]byte(stdout), &list); err != nil {
			t.Fatalf("doctor %q: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout, stderr)
		}
		out := map[string]doctor.Check{}
		for _, c := range list {
			out[c.Name] = c
		}
		return out
	}

	got := checks("--name", "mine")
	if c := got["cluster"]; !strings.Contains(c.Detail, "cluster mine exists") || !strings.Contains(c.Detail, "mine-cp on docker") {
		t.Errorf("cluster check = %+v", c)
	}
	for name, c := range got {
		if strings.Contains(c.Detail, "the cluster's nodes use it") && name != "driver docker" {
			t.Errorf("%s: %s; the recorded cluster uses docker only", name, c.Detail)
		}
	}
	if c := got["node images"]; c.Status != doctor.Skip {
		t.Errorf("node images = %+v; a made cluster needs no image", c)
	}
	if c := got["node subnet"]; !strings.Contains(c.Detail, "recorded for the cluster") {
		t.Errorf("node subnet = %+v", c)
	}

	got = checks("--name", "other", "--driver", "docker", "--windows-workers", "0")
	if c := got["cluster"]; !strings.Contains(c.Detail, "no cluster other yet") || !strings.Contains(c.Detail, "flags and defaults") {
		t.Errorf("cluster check for a cluster to be made = %+v", c)
	}

	// Shaping flags do not apply to a cluster that exists: doctor reports
	// that it ignores them.
	_, _, stderr = run(t, "doctor", "-o", "json", "--name", "mine", "--windows-workers", "2")
	if !strings.Contains(stderr, "ignores --windows-workers") {
		t.Errorf("stderr = %q", stderr)
	}
}

// TestDoctorTextReport checks that the text report is a header, then a line
// per check with its status in one column, and each fix under the details.
func TestDoctorTextReport(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	t.Setenv("KUBECONFIG", filepath.Join(home, "kubeconfig"))
	_, stdout, stderr := run(t, "doctor", "--driver", "docker", "--windows-workers", "0")
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	header := lines[0]
	col := strings.Index(header, "STATUS")
	detail := strings.Index(header, "DETAIL")
	if !strings.HasPrefix(header, "CHECK ") || col < len("driver virtualbox ") || detail != col+8 {
		t.Fatalf("header %q\nstderr:\n%s", header, stderr)
	}
	names := 0
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, strings.Repeat(" ", detail)+"  fix: ") {
			continue
		}
		names++
		status := strings.Fields(l[col:])[0]
		if l[col-1] != ' ' || !slices.Contains([]string{"ok", "warn", "fail", "skip"}, status) {
			t.Errorf("line %q has no status at column %d", l, col)
		}
	}
	if names < 10 || !strings.HasPrefix(lines[1], "cluster ") {
		t.Errorf("%d checks:\n%s", names, stdout)
	}
}
