package isoimage

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteAndReadBack(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "kubelet.exe")
	content := bytes.Repeat([]byte("MZ binary "), 300_000) // 3 MB, streamed
	if err := os.WriteFile(big, content, 0o644); err != nil {
		t.Fatal(err)
	}
	image := filepath.Join(dir, "build.iso")
	files := []File{
		{Name: "Autounattend.xml", Data: []byte("<unattend/>")},
		{Name: "bin/k/kubelet.exe", Source: big},
		{Name: "bin/hwk-seed.exe", Data: []byte("seed")},
		{Name: "meta-data", Data: []byte("instance-id: x\n")},
	}
	for i := 0; i < 2; i++ { // the second write replaces the first
		if err := Write(image, "HWKSEED", files); err != nil {
			t.Fatal(err)
		}
	}
	label, got, err := Read(image)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(files) {
		t.Errorf("%d files read back, want %d", len(got), len(files))
	}
	if label != "HWKSEED" {
		t.Errorf("label %q", label)
	}
	if string(got["Autounattend.xml"]) != "<unattend/>" || !bytes.Equal(got["bin/k/kubelet.exe"], content) || string(got["meta-data"]) != "instance-id: x\n" {
		t.Error("contents differ")
	}
}

func TestWriteRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		label string
		files []File
		want  string
		is    error // what the error wraps, when it puts it in the OS's words
	}{
		"label":   {strings.Repeat("x", 33), nil, "1 to 32", nil},
		"dotdot":  {"L", []File{{Name: "../x", Data: []byte{}}}, "bad file name", nil},
		"twice":   {"L", []File{{Name: "a"}, {Name: "a"}}, "a twice", nil},
		"missing": {"L", []File{{Name: "a", Source: filepath.Join(dir, "nope")}}, filepath.Join(dir, "nope"), fs.ErrNotExist},
	} {
		t.Run(name, func(t *testing.T) {
			err := Write(filepath.Join(dir, "x.iso"), c.label, c.files)
			if err == nil || !strings.Contains(err.Error(), c.want) || (c.is != nil && !errors.Is(err, c.is)) {
				t.Errorf("err = %v, want one saying %q (wrapping %v)", err, c.want, c.is)
			}
		})
	}
}
