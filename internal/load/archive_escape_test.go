package load

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/format/imagearchive"
	"github.com/hwk-dev/hwk/internal/testing/imagearchivetest"
)

// escapingEntries are entries that lead outside an image archive, by the
// name its refusal must give.
var escapingEntries = map[string]*tar.Header{
	"../escape":                  {Name: "../escape", Typeflag: tar.TypeReg},
	"/abs":                       {Name: "/abs", Typeflag: tar.TypeReg},
	"blobs/../../up":             {Name: "blobs/../../up", Typeflag: tar.TypeReg},
	"symlink out of the archive": {Name: "blobs/sha256/x", Linkname: "../../../etc/passwd", Typeflag: tar.TypeSymlink},
	"absolute symlink":           {Name: "blobs/sha256/abs", Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink},
	"hard link out":              {Name: "blobs/sha256/hard", Linkname: "../outside", Typeflag: tar.TypeLink},
}

// withEntry returns archive with h (of content "x", for a file) after its
// index.json, where a reader would meet it before the blobs.
func withEntry(t *testing.T, archive []byte, h *tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		gh, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		content, _ := io.ReadAll(tr)
		_ = tw.WriteHeader(gh)
		_, _ = tw.Write(content)
		if gh.Name == "index.json" {
			e := *h
			e.Mode = 0o644
			if e.Typeflag == tar.TypeReg {
				e.Size = 1
			}
			if err := tw.WriteHeader(&e); err != nil {
				t.Fatal(err)
			}
			if e.Typeflag == tar.TypeReg {
				_, _ = tw.Write([]byte("x"))
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// escapeSandbox is a directory holding the archive's directory and, beside
// it, a sentinel directory with one file.
type escapeSandbox struct{ root, archive string }

func newEscapeSandbox(t *testing.T, data []byte) *escapeSandbox {
	t.Helper()
	root := t.TempDir()
	s := &escapeSandbox{root: root, archive: filepath.Join(root, "work", "images.tar")}
	for p, b := range map[string][]byte{s.archive: data, filepath.Join(root, "sentinel", "keep"): []byte("keep")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// untouched checks that the sandbox holds the archive and the sentinel,
// as they were, and nothing else.
func (s *escapeSandbox) untouched(t *testing.T, data []byte) {
	t.Helper()
	var got []string
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(s.root, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "sentinel/keep work/images.tar" {
		t.Errorf("the sandbox holds %v, want only the archive and the sentinel", got)
	}
	if b, err := os.ReadFile(filepath.Join(s.root, "sentinel", "keep")); err != nil || string(b) != "keep" {
		t.Errorf("the sentinel changed: %q, %v", b, err)
	}
	if b, err := os.ReadFile(s.archive); err != nil || !bytes.Equal(b, data) {
		t.Errorf("the archive changed (%v)", err)
	}
}

// TestLoadArchiveRefusesEntriesOutsideIt checks that an archive with an
// entry whose name or link leads outside it is refused before anything
// reaches a node, naming the entry, with nothing written beside it.
func TestLoadArchiveRefusesEntriesOutsideIt(t *testing.T) {
	// Why nothing else: `hwk load-image --archive` never unpacks an
	// archive; it scans it, then writes each node an archive of its own
	// making whose entries are index.json, oci-layout and blobs named by
	// digest.
	d := loadCluster(t, "cp", "linux", "win", "2022")
	good := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"example.com/app:1"}, Platforms: []string{linuxAMD64, win2022}})
	for name, h := range escapingEntries {
		t.Run(name, func(t *testing.T) {
			data := withEntry(t, good, h)
			s := newEscapeSandbox(t, data)
			_, err := Load(context.Background(), d, Options{Archives: []string{s.archive}})
			if err == nil || !strings.Contains(err.Error(), s.archive) || !strings.Contains(err.Error(), `"`+h.Name+`"`) ||
				!strings.Contains(err.Error(), "outside the archive") || !strings.Contains(err.Error(), "nothing was loaded") {
				t.Fatalf("Load = %v, want the entry %q refused", err, h.Name)
			}
			for n, f := range d.nodes {
				if f.imports != 0 || len(f.holds()) != 0 {
					t.Errorf("%s got images from the archive", n)
				}
			}
			s.untouched(t, data)
		})
	}
	// The control: the archive without the entry loads.
	s := newEscapeSandbox(t, good)
	if _, err := Load(context.Background(), d, Options{Archives: []string{s.archive}}); err != nil {
		t.Fatal(err)
	}
	s.untouched(t, good)
}

// hostileSave is an engine whose save holds an entry that leads outside
// the archive.
type hostileSave struct {
	Engine
	archive []byte
}

func (h hostileSave) Save(context.Context, []string, []imagearchive.Platform) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(h.archive)), nil
}

// TestLoadEngineStreamRefusesEntriesOutsideIt checks that an engine's save
// (Docker's containerd store) streams to the nodes through
// imagearchive.Filter, which passes entries on as they come; one that leads
// outside the archive fails the stream before it is passed on, and no node
// imports anything.
func TestLoadEngineStreamRefusesEntriesOutsideIt(t *testing.T) {
	d := loadCluster(t, "cp", "linux", "w", "linux")
	archive, inspect, _ := storeImage(t, "v1", true)
	for name, h := range escapingEntries {
		t.Run(name, func(t *testing.T) {
			f := &fakeEngine{api: "1.52", inspect: inspect}
			eng := hostileSave{Engine: engineFor(t, f), archive: withEntry(t, archive, h)}
			_, err := Load(context.Background(), d, Options{Images: []string{"my/app:v1"}, Engine: eng})
			if err == nil || !strings.Contains(err.Error(), `"`+h.Name+`"`) || !strings.Contains(err.Error(), "outside the archive") {
				t.Fatalf("Load = %v, want the entry %q refused", err, h.Name)
			}
			for n, f := range d.nodes {
				if len(f.holds()) != 0 {
					t.Errorf("%s holds %v from the stream", n, f.holds())
				}
			}
		})
	}
}
