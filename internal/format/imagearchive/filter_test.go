package imagearchive_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/format/imagearchive"
	"github.com/hwk-dev/hwk/internal/testing/imagearchivetest"
)

// names lists a tar's entries, failing the test if it does not read to
// its end.
func names(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("filtered archive: %v", err)
		}
		out = append(out, h.Name)
	}
}

func blobPath(d string) string { return "blobs/sha256/" + strings.TrimPrefix(d, "sha256:") }

func skipping(ds ...string) func(string) bool {
	return func(d string) bool { return slices.Contains(ds, d) }
}

// TestFilterLeavesOutWhatTheNodeHas checks that a save whose base layers the
// node holds goes on without them, and the figures say one layer sent, two
// reused; what the reader gets is a whole tar whose manifest lacks just
// those blobs.
func TestFilterLeavesOutWhatTheNodeHas(t *testing.T) {
	src := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"my/app:v2"}, Platforms: []string{"linux/amd64"}, Base: []string{"base-os", "base-runtime"}, LayerBytes: 8192, Gzip: true})
	m := scan(t, src).Images[0].Manifests[0]
	var out bytes.Buffer
	f, err := imagearchive.Filter(&out, bytes.NewReader(src), skipping(m.Layers[0].Digest, m.Layers[1].Digest))
	if err != nil {
		t.Fatal(err)
	}
	got := names(t, out.Bytes())
	for _, l := range m.Layers[:2] {
		if slices.Contains(got, blobPath(l.Digest)) {
			t.Errorf("base layer %s was passed on", l.Digest)
		}
	}
	for _, want := range []string{blobPath(m.Layers[2].Digest), blobPath(m.Config), blobPath(m.Digest), "index.json"} {
		if !slices.Contains(got, want) {
			t.Errorf("%s is missing from the filtered archive %v", want, got)
		}
	}
	if c := f.Carried("docker.io/my/app:v2"); c.LayersSent != 1 || c.LayersReused != 2 || c.Bytes < m.Layers[2].Size || c.Bytes > m.Layers[2].Size+4096 {
		t.Errorf("carried %+v, want 1 layer sent (%d bytes with the config and manifest), 2 reused", c, m.Layers[2].Size)
	}
	if c := f.Carried("docker.io/other:1"); c != (imagearchive.Carried{}) {
		t.Errorf("an image the archive lacks carried %+v", c)
	}
	// The whole archive is still described, left-out blobs included.
	if fm := f.Images[0].Manifests[0]; fm.Missing != "" || len(fm.Layers) != 3 {
		t.Errorf("description: %+v", fm)
	}
}

// TestFilterLeavesOutALargeBlobUnread checks that a large blob left out is
// read past without being checked (nothing of it goes anywhere), so a
// damaged copy of a layer the node holds does not fail the load.
func TestFilterLeavesOutALargeBlobUnread(t *testing.T) {
	src := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"my/big:1"}, Platforms: []string{"linux/amd64"}, Seed: "big", LayerBytes: 5 << 20})
	m := scan(t, src).Images[0].Manifests[0]
	bad := imagearchivetest.Corrupt(src, []byte("big-linux/amd64big"))
	var out bytes.Buffer
	f, err := imagearchive.Filter(&out, bytes.NewReader(bad), skipping(m.Layers[0].Digest))
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Carried("docker.io/my/big:1"); c.LayersSent != 0 || c.LayersReused != 1 {
		t.Errorf("carried %+v, want the layer reused", c)
	}
	if out.Len() > 64<<10 {
		t.Errorf("passed on %d bytes, want only the small blobs", out.Len())
	}
}

// TestFilterCorruptBlobFailsAndPoisons checks that a blob that goes on and
// does not match its name fails the filter, and the reader's stream does not
// end as a tar, so an importer takes nothing from it.
func TestFilterCorruptBlobFailsAndPoisons(t *testing.T) {
	src := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"my/app:v2"}, Platforms: []string{"linux/amd64"}, Seed: "app", Base: []string{"base-os"}, LayerBytes: 8192})
	m := scan(t, src).Images[0].Manifests[0]
	bad := imagearchivetest.Corrupt(src, []byte("app-linux/amd64app"))
	var out bytes.Buffer
	_, err := imagearchive.Filter(&out, bytes.NewReader(bad), skipping(m.Layers[0].Digest))
	if err == nil || !strings.Contains(err.Error(), "archive is corrupt") {
		t.Fatalf("Filter = %v, want a corrupt-archive error", err)
	}
	if imagearchivetest.WholeTar(out.Bytes()) {
		t.Fatal("the stream after a corrupt blob reads as a whole tar")
	}
}

// TestFilterReaderStops checks that when the reader of the filtered stream
// stops (its import failed), Filter returns the reader's error, not one of
// its own about the archive.
func TestFilterReaderStops(t *testing.T) {
	src := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"my/app:v2"}, Platforms: []string{"linux/amd64"}, LayerBytes: 64 << 10})
	gone := errors.New("the node stopped reading")
	_, err := imagearchive.Filter(&failingWriter{left: 4096, err: gone}, bytes.NewReader(src), skipping())
	if !errors.Is(err, gone) {
		t.Fatalf("Filter = %v, want the reader's error", err)
	}
}

type failingWriter struct {
	left int
	err  error
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left = 0
		return n, w.err
	}
	w.left -= len(p)
	return len(p), nil
}

// TestFilterPassesClassicLayoutsOn checks that everything of a classic
// docker save, which names its layers by directory, not digest, goes on as
// it came.
func TestFilterPassesClassicLayoutsOn(t *testing.T) {
	src := imagearchivetest.Docker(imagearchivetest.Image{Refs: []string{"my/app:v1"}, Platforms: []string{"linux/amd64"}, Base: []string{"base-os"}})
	var out bytes.Buffer
	f, err := imagearchive.Filter(&out, bytes.NewReader(src), func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, out.Bytes()), names(t, src); !slices.Equal(got, want) {
		t.Errorf("passed on %v, want %v", got, want)
	}
	if c := f.Carried("docker.io/my/app:v1"); c.LayersSent != 2 || c.LayersReused != 0 {
		t.Errorf("carried %+v, want both layers sent", c)
	}
}

// TestPlanPartialArchive checks that an archive that lacks layers (what a
// push sent hwk) plans for a node that holds them, and for no other.
func TestPlanPartialArchive(t *testing.T) {
	src := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"my/app:v2"}, Platforms: []string{"linux/amd64"}, Base: []string{"base-os", "base-runtime"}, LayerBytes: 2048, Gzip: true})
	m := scan(t, src).Images[0].Manifests[0]
	var partial bytes.Buffer
	if _, err := imagearchive.Filter(&partial, bytes.NewReader(src), skipping(m.Layers[0].Digest, m.Layers[1].Digest)); err != nil {
		t.Fatal(err)
	}
	a := scan(t, partial.Bytes())
	both := holds{blobs: map[string]bool{m.Layers[0].Digest: true, m.Layers[1].Digest: true}}
	p, err := a.Plan([]imagearchive.Selection{{Image: 0}}, both)
	if err != nil {
		t.Fatalf("Plan for a node holding the missing layers: %v", err)
	}
	if c := p.Images[0]; c.LayersSent != 1 || c.LayersReused != 2 {
		t.Errorf("carried %+v, want 1 sent, 2 reused", c)
	}
	var out bytes.Buffer
	if err := a.Write(&out, bytes.NewReader(partial.Bytes()), p); err != nil {
		t.Fatalf("Write: %v", err)
	}
	for _, have := range []imagearchive.Have{nil, holds{blobs: map[string]bool{m.Layers[0].Digest: true}}} {
		if _, err := a.Plan([]imagearchive.Selection{{Image: 0}}, have); !errors.Is(err, imagearchive.ErrIncomplete) {
			t.Errorf("Plan for a node holding %v: %v, want ErrIncomplete", have, err)
		}
	}
}
