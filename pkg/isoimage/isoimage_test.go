package isoimage

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	diskfs "github.com/diskfs/go-diskfs"
)

func read(t *testing.T, image string, names ...string) (string, map[string][]byte) {
	t.Helper()
	d, err := diskfs.Open(image, diskfs.WithOpenMode(diskfs.ReadOnly), diskfs.WithSectorSize(2048))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fs, err := d.GetFilesystem(0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		f, err := fs.OpenFile("/"+n, os.O_RDONLY)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		var b bytes.Buffer
		if _, err := b.ReadFrom(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
		out[n] = b.Bytes()
	}
	return strings.TrimRight(fs.Label(), "\x00 "), out
}

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
	label, got := read(t, image, "Autounattend.xml", "bin/k/kubelet.exe", "bin/hwk-seed.exe", "meta-data")
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
	}{
		"label":   {strings.Repeat("x", 33), nil, "1 to 32"},
		"dotdot":  {"L", []File{{Name: "../x", Data: []byte{}}}, "bad file name"},
		"twice":   {"L", []File{{Name: "a"}, {Name: "a"}}, "a twice"},
		"missing": {"L", []File{{Name: "a", Source: filepath.Join(dir, "nope")}}, "no such file"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := Write(filepath.Join(dir, "x.iso"), c.label, c.files); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}
