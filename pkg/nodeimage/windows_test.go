package nodeimage

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/winimagetest"
)

// TestUpdateFiles checks that --updates takes the .msu and .cab files of a
// directory in file-name order (case ignored), leaves other files out,
// and refuses, naming the flag and the fix, a directory that is not
// there or holds no package, and names DISM could not be given.
func TestUpdateFiles(t *testing.T) {
	dir := winimagetest.UpdatesDir(t, "windows10.0-kb5044281-x64_3e6e7ab5d8b1.msu", "A-ssu.CAB", "README.txt")
	if err := os.Mkdir(filepath.Join(dir, "old.msu"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := UpdateFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, filepath.Base(p))
	}
	if want := []string{"A-ssu.CAB", "windows10.0-kb5044281-x64_3e6e7ab5d8b1.msu"}; !slices.Equal(names, want) {
		t.Errorf("updates %q, want %q", names, want)
	}

	file := filepath.Join(dir, "README.txt")
	for name, c := range map[string]struct{ dir, want string }{
		"missing":    {filepath.Join(dir, "nope"), "--updates " + filepath.Join(dir, "nope") + ": "},
		"a file":     {file, "--updates " + file + ": "},
		"no package": {winimagetest.UpdatesDir(t, "notes.txt"), "holds no .msu or .cab file: download the latest cumulative update"},
		"a space":    {winimagetest.UpdatesDir(t, "my update.msu"), `--updates: "my update.msu" is not a name hwk can pass to DISM: rename it`},
	} {
		if _, err := UpdateFiles(c.dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	// Names that differ only in case are two files on Linux, and one on
	// Windows (NTFS ignores case), where there is nothing to refuse.
	twins := winimagetest.UpdatesDir(t, "lcu.msu", "LCU.msu")
	entries, err := os.ReadDir(twins)
	if err != nil {
		t.Fatal(err)
	}
	_, err = UpdateFiles(twins)
	switch {
	case len(entries) == 2 && (err == nil || !strings.Contains(err.Error(), "are the same name to Windows; keep one")):
		t.Errorf("case twins: %v, want them refused", err)
	case len(entries) == 1 && err != nil:
		t.Errorf("one file on a file system that ignores case: %v", err)
	}
	// Validate reports it with the rest, before anything is made.
	o := WindowsOptions{Updates: filepath.Join(dir, "nope")}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--updates ") {
		t.Errorf("Validate: %v", err)
	}
}

// TestWindowsBuildString checks that BuildString gives the manifest's
// build with its revision when the install reported one.
func TestWindowsBuildString(t *testing.T) {
	if s := (&Windows{Build: 20348, UBR: 2762}).BuildString(); s != "20348.2762" {
		t.Errorf("%q", s)
	}
	if s := (&Windows{Build: 20348}).BuildString(); s != "20348" {
		t.Errorf("%q", s)
	}
}
