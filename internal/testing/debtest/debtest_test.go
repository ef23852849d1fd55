package debtest

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os/exec"
	"strings"
	"testing"

	"github.com/xi2/xz"
	"pault.ag/go/debian/deb"
)

// TestDebReads: what Build writes is a .deb pault.ag's reader (which the
// assembler will use) takes apart, whatever the compression.
func TestDebReads(t *testing.T) {
	for _, c := range []string{"xz", "gz", "zst", "none"} {
		d := Deb{
			Package: "hello", Version: "1:2.10-3", Depends: "libc6 (>= 2.34)", Compression: c,
			Control: map[string]string{"postinst": "#!/bin/sh\nexit 0\n", "conffiles": "/etc/hello.conf\n"},
			Files: []File{
				{Path: "/usr/bin/hello", Mode: 0o755, Body: "#!/bin/sh\necho hello\n"},
				{Path: "/etc/hello.conf", Body: "greeting=hi\n"},
				{Path: "/usr/bin/hi", Mode: fs.ModeSymlink | 0o777, Link: "hello"},
			},
		}
		data, err := d.Build()
		if err != nil {
			t.Fatal(err)
		}
		again, _ := d.Build()
		if !bytes.Equal(data, again) {
			t.Errorf("%s: two builds differ", c)
		}
		pkg, err := deb.Load(bytes.NewReader(data), "hello.deb")
		if err != nil {
			t.Fatalf("%s: pault.ag cannot read the .deb: %v", c, err)
		}
		if pkg.Control.Package != "hello" || pkg.Control.Version.String() != "1:2.10-3" || pkg.Control.Depends.String() != "libc6 (>= 2.34)" {
			t.Errorf("%s: control = %s %s %s", c, pkg.Control.Package, pkg.Control.Version, pkg.Control.Depends.String())
		}
		var names []string
		for {
			h, err := pkg.Data.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: data.tar: %v", c, err)
			}
			names = append(names, h.Name)
			if h.Name == "./usr/bin/hello" {
				body, _ := io.ReadAll(pkg.Data)
				if string(body) != "#!/bin/sh\necho hello\n" || h.Mode != 0o755 {
					t.Errorf("%s: ./usr/bin/hello = %q mode %o", c, body, h.Mode)
				}
			}
			if h.Name == "./usr/bin/hi" && (h.Typeflag != tar.TypeSymlink || h.Linkname != "hello") {
				t.Errorf("%s: ./usr/bin/hi is %c -> %q", c, h.Typeflag, h.Linkname)
			}
		}
		pkg.Close()
		want := "./ ./usr/ ./usr/bin/ ./usr/bin/hello ./etc/ ./etc/hello.conf ./usr/bin/hi"
		if got := strings.Join(names, " "); got != want {
			t.Errorf("%s: data.tar holds %s, want %s", c, got, want)
		}
	}
	if got, want := (Deb{Package: "libc6", Version: "2.36-9", Architecture: "amd64"}).Filename(), "pool/main/libc/libc6/libc6_2.36-9_amd64.deb"; got != want {
		t.Errorf("Filename = %s, want %s", got, want)
	}
}

// TestStoredXZ: the hand-made xz container reads back with xi2/xz and
// passes the xz tool's own check, across LZMA2 chunk boundaries.
func TestStoredXZ(t *testing.T) {
	for _, n := range []int{0, 1, 3, 1 << 16, 1<<16 + 1, 200_001} {
		data := bytes.Repeat([]byte("hwk debtest "), n/12+1)[:n]
		z := StoredXZ(data)
		r, err := xz.NewReader(bytes.NewReader(z), 0)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%d bytes: read back %d bytes, %v", n, len(got), err)
		}
		if _, err := exec.LookPath("xz"); err == nil {
			cmd := exec.Command("xz", "-t")
			cmd.Stdin = bytes.NewReader(z)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%d bytes: xz -t: %v %s", n, err, out)
			}
		}
	}
}

// TestMirrorBadDeb: a BadDeb is served changed, same length, while Files
// and Debs keep what the Packages index describes.
func TestMirrorBadDeb(t *testing.T) {
	debs := []Deb{{Package: "a", Version: "1"}, {Package: "b", Version: "2"}}
	m := NewMirror(t, MirrorOptions{Debs: debs, Faults: Faults{BadDeb: "b"}})
	for _, d := range debs {
		resp, err := m.Server.Client().Get(m.URL + "/" + d.Filename())
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if same := bytes.Equal(got, m.Debs[d.Package]); same != (d.Package == "a") || len(got) != len(m.Debs[d.Package]) {
			t.Errorf("%s: served %d bytes, same as built: %v", d.Package, len(got), same)
		}
	}
	if r := m.Requests(); len(r) != 2 || r[0] != "GET /debian/pool/main/a/a/a_1_amd64.deb" {
		t.Errorf("Requests = %q", r)
	}
}
