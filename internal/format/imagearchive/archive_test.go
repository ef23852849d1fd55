package imagearchive_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/format/imagearchive"
	"github.com/hwk-dev/hwk/internal/testing/imagearchivetest"
)

func mustParse(t *testing.T, s string) imagearchive.Platform {
	t.Helper()
	p, err := imagearchive.ParsePlatform(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRuns(t *testing.T) {
	for _, c := range []struct {
		host, img string
		ok        bool
		why       string
	}{
		{"linux/amd64", "linux/amd64", true, ""},
		{"linux/x86_64", "linux/amd64", true, ""},
		{"linux/amd64", "linux/arm64", false, "built for linux/arm64, the node is linux/amd64"},
		{"linux/amd64", "windows/amd64:10.0.20348.2849", false, "a windows image cannot run on a linux node"},
		{"windows/amd64:10.0.20348", "linux/amd64", false, "a linux image cannot run on a windows node"},
		{"windows/amd64:10.0.20348", "windows/amd64:10.0.20348.2849", true, ""},
		{"windows/amd64:10.0.20348", "windows/amd64:10.0.26100.1742", false, "newer Windows (ltsc2025, build 26100) than the node's ltsc2022"},
		{"windows/amd64:10.0.20348", "windows/amd64:10.0.17763.1", false, "older Windows (ltsc2019, build 17763)"},
		{"windows/amd64:10.0.26100", "windows/amd64:10.0.20348.2849", true, ""},
		{"windows/amd64:10.0.26100", "windows/amd64:10.0.26100.1", true, ""},
		{"windows/amd64:10.0.26100", "windows/amd64:10.0.17763.1", false, "accepts (ltsc2022, build 20348 or newer)"},
		{"windows/amd64:10.0.17763", "windows/amd64:10.0.17763.5", true, ""},
		{"windows/amd64:10.0.17763", "windows/amd64:10.0.20348", false, "newer Windows"},
		{"windows/amd64:10.0.20348", "windows/amd64", false, "no os.version"},
	} {
		ok, why := imagearchive.Runs(mustParse(t, c.host), mustParse(t, c.img))
		if ok != c.ok || !strings.Contains(why, c.why) {
			t.Errorf("Runs(%s, %s) = %v, %q; want %v, %q", c.host, c.img, ok, why, c.ok, c.why)
		}
	}
}

func TestBestPrefersNewestWindowsBuild(t *testing.T) {
	cands := []imagearchive.Platform{mustParse(t, "linux/amd64"), mustParse(t, "windows/amd64:10.0.20348.1"), mustParse(t, "windows/amd64:10.0.26100.1")}
	if got := imagearchive.Best(mustParse(t, "windows/amd64:10.0.26100"), cands); got != 2 {
		t.Errorf("a 2025 node: Best = %d, want 2 (the ltsc2025 image)", got)
	}
	if got := imagearchive.Best(mustParse(t, "windows/amd64:10.0.20348"), cands); got != 1 {
		t.Errorf("a 2022 node: Best = %d, want 1", got)
	}
	if got := imagearchive.Best(mustParse(t, "linux/arm64"), cands); got != -1 {
		t.Errorf("an arm64 node: Best = %d, want -1", got)
	}
}

func scan(t *testing.T, b []byte) *imagearchive.Archive {
	t.Helper()
	a, err := imagearchive.Scan(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return a
}

func TestScanOCI(t *testing.T) {
	a := scan(t, imagearchivetest.OCI(
		imagearchivetest.Image{Refs: []string{"example.com/app:1", "example.com/app:latest"}, Platforms: []string{"linux/amd64"}},
		imagearchivetest.Image{Refs: []string{"busybox:1.37"}, Platforms: []string{"linux/amd64", "linux/arm64/v8", "windows/amd64:10.0.20348.2849"}},
	))
	if len(a.Images) != 2 {
		t.Fatalf("images = %d, want 2", len(a.Images))
	}
	app, bb := a.Images[0], a.Images[1]
	if got := strings.Join(app.Refs, " "); got != "example.com/app:1 example.com/app:latest" {
		t.Errorf("refs = %s", got)
	}
	if got := strings.Join(bb.Refs, " "); got != "docker.io/library/busybox:1.37" {
		t.Errorf("refs not normalized: %s", got)
	}
	var plats []string
	for _, p := range bb.Platforms() {
		plats = append(plats, p.String())
	}
	if got := strings.Join(plats, " "); got != "linux/amd64 linux/arm64 windows/amd64:10.0.20348.2849" {
		t.Errorf("platforms = %s", got)
	}
	for _, m := range bb.Manifests {
		if m.Missing != "" || !strings.HasPrefix(m.Config, "sha256:") || !strings.HasPrefix(m.Digest, "sha256:") || m.Bytes == 0 {
			t.Errorf("manifest %+v incomplete", m)
		}
	}
}

func TestScanDockerClassic(t *testing.T) {
	a := scan(t, imagearchivetest.Docker(
		imagearchivetest.Image{Refs: []string{"my/app:dev"}, Platforms: []string{"linux/amd64"}},
		imagearchivetest.Image{Refs: []string{"my/win:dev"}, Platforms: []string{"windows/amd64:10.0.20348.1"}},
	))
	if len(a.Images) != 2 || a.Images[0].Refs[0] != "docker.io/my/app:dev" {
		t.Fatalf("images = %+v", a.Images)
	}
	w := a.Images[1]
	if w.Manifests[0].Platform.String() != "windows/amd64:10.0.20348.1" || w.Digest != w.Manifests[0].Config {
		t.Errorf("windows image = %+v", w.Manifests[0])
	}
}

func TestScanGzip(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(imagearchivetest.Docker(imagearchivetest.Image{Refs: []string{"a:1"}, Platforms: []string{"linux/amd64"}}))
	_ = zw.Close()
	if a := scan(t, gz.Bytes()); len(a.Images) != 1 {
		t.Errorf("images = %d", len(a.Images))
	}
}

func TestScanMissingPlatform(t *testing.T) {
	a := scan(t, imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"a:1"}, Platforms: []string{"linux/amd64", "linux/arm64"}, Drop: []int{1}}))
	ms := a.Images[0].Manifests
	if ms[0].Missing != "" || ms[1].Missing == "" {
		t.Fatalf("missing = %q, %q; want only arm64 missing", ms[0].Missing, ms[1].Missing)
	}
	if _, err := a.Plan([]imagearchive.Selection{{Image: 0, Manifest: 1}}, nil); !errors.Is(err, imagearchive.ErrIncomplete) {
		t.Errorf("Plan of the missing platform: %v, want ErrIncomplete", err)
	}
}

func TestScanRejectsBadArchives(t *testing.T) {
	good := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"a:1"}, Platforms: []string{"linux/amd64"}, LayerBytes: 64 << 10})
	classic := imagearchivetest.Docker(imagearchivetest.Image{Refs: []string{"a:1"}, Platforms: []string{"linux/amd64"}, LayerBytes: 64 << 10})
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"not a tar":         {[]byte("hello, this is not an archive at all"), "not a readable tar archive"},
		"empty":             {nil, "not a readable tar archive"},
		"cut short":         {good[:len(good)/2], "cut short"},
		"oci blob flipped":  {imagearchivetest.Corrupt(good, []byte("0-linux/amd640-linux")), "archive is corrupt"},
		"layer tar flipped": {imagearchivetest.Corrupt(classic, []byte("0-linux/amd640-linux")), "archive is corrupt"},
		"no manifest":       {imagearchivetest.TarOf(map[string]string{"hello.txt": "hi"}), "not an image archive"},
		"missing layer":     {imagearchivetest.TarOf(map[string]string{"manifest.json": `[{"Config":"c.json","RepoTags":["a:1"],"Layers":["l/layer.tar"]}]`, "c.json": `{"os":"linux","architecture":"amd64","rootfs":{"diff_ids":["sha256:00"]}}`}), "lacks the layer"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := imagearchive.Scan(bytes.NewReader(c.data))
			var fe *imagearchive.FormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Scan = %v, want a FormatError with %q", err, c.want)
			}
		})
	}
}

// rewrite scans src, writes the archive of sels from it and scans that.
func rewrite(t *testing.T, src []byte, sels ...imagearchive.Selection) (from, written *imagearchive.Archive) {
	t.Helper()
	a := scan(t, src)
	plan, err := a.Plan(sels, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := a.Write(&out, bytes.NewReader(src), plan); err != nil {
		t.Fatal(err)
	}
	return a, scan(t, out.Bytes())
}

// TestWriteKeepsOnlyTheSelection writes, from a three-platform index and
// a second image, an archive of one platform of the first, and reads it
// back as a node's containerd would.
func TestWriteKeepsOnlyTheSelection(t *testing.T) {
	src := imagearchivetest.OCI(
		imagearchivetest.Image{Refs: []string{"busybox:1.37"}, Platforms: []string{"linux/amd64", "linux/arm64", "windows/amd64:10.0.20348.1"}, LayerBytes: 32 << 10},
		imagearchivetest.Image{Refs: []string{"other:1"}, Platforms: []string{"linux/amd64"}},
	)
	a, b := rewrite(t, src, imagearchive.Selection{Image: 0, Manifest: 2})
	if len(b.Images) != 1 || len(b.Images[0].Manifests) != 1 {
		t.Fatalf("written archive holds %+v, want one image of one platform", b.Images)
	}
	got := b.Images[0]
	want := a.Images[0].Manifests[2]
	if got.Refs[0] != "docker.io/library/busybox:1.37" || got.Manifests[0].Config != want.Config || got.Manifests[0].Digest != want.Digest {
		t.Errorf("written image = %+v, want busybox's windows manifest %s", got, want.Digest)
	}
	if b.Bytes > a.Bytes/2 {
		t.Errorf("written archive has %d bytes of %d: the other platforms came along", b.Bytes, a.Bytes)
	}
}

func TestWriteClassicAsOCI(t *testing.T) {
	src := imagearchivetest.Docker(imagearchivetest.Image{Refs: []string{"my/app:dev", "my/app:latest"}, Platforms: []string{"linux/amd64"}})
	a, b := rewrite(t, src, imagearchive.Selection{Image: 0, Manifest: 0})
	if got := strings.Join(b.Images[0].Refs, " "); got != "docker.io/my/app:dev docker.io/my/app:latest" {
		t.Errorf("refs = %s", got)
	}
	if b.Images[0].Manifests[0].Config != a.Images[0].Digest {
		t.Errorf("config %s, want the image ID %s", b.Images[0].Manifests[0].Config, a.Images[0].Digest)
	}
}

// TestWritePoisonsOnChange checks that when the file changed after Scan,
// what was written must not read as a whole archive.
func TestWritePoisonsOnChange(t *testing.T) {
	src := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"a:1"}, Platforms: []string{"linux/amd64"}, LayerBytes: 64 << 10})
	a := scan(t, src)
	plan, err := a.Plan([]imagearchive.Selection{{Image: 0, Manifest: 0}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	changed := imagearchivetest.Corrupt(src, []byte("0-linux/amd640-linux"))
	if err := a.Write(&out, bytes.NewReader(changed), plan); err == nil || !strings.Contains(err.Error(), "changed since it was read") {
		t.Fatalf("Write = %v, want a changed-archive error", err)
	}
	if imagearchivetest.WholeTar(out.Bytes()) {
		t.Fatal("the poisoned stream read as a whole tar archive")
	}
}

// holds is a node's inventory for Plan: blobs by digest, snapshots by
// chain ID.
type holds struct{ blobs, snaps map[string]bool }

func (h holds) Blob(d string) bool     { return h.blobs[d] }
func (h holds) Snapshot(c string) bool { return h.snaps[c] }

// planned plans sels against have, writes the archive and scans it.
func planned(t *testing.T, src []byte, have imagearchive.Have, sels ...imagearchive.Selection) (*imagearchive.Plan, *imagearchive.Archive) {
	t.Helper()
	a := scan(t, src)
	p, err := a.Plan(sels, have)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := a.Write(&out, bytes.NewReader(src), p); err != nil {
		t.Fatal(err)
	}
	return p, scan(t, out.Bytes())
}

// TestPlanSkipsWhatTheNodeHas checks that a rebuilt image whose two base
// layers the node holds as content (a classic save: blobs are diff IDs)
// goes with its top layer only, the written archive lacks exactly those
// blobs and its figures show it, and a second image sharing the base in the
// same plan does not send it either.
func TestPlanSkipsWhatTheNodeHas(t *testing.T) {
	base := []string{"base-os", "base-runtime"}
	v1 := imagearchivetest.Docker(imagearchivetest.Image{Refs: []string{"my/app:v1"}, Platforms: []string{"linux/amd64"}, Base: base, LayerBytes: 4096})
	old := scan(t, v1).Images[0].Manifests[0]
	src := imagearchivetest.Docker(
		imagearchivetest.Image{Refs: []string{"my/app:v2"}, Platforms: []string{"linux/amd64"}, Base: base, LayerBytes: 8192},
		imagearchivetest.Image{Refs: []string{"my/tool:v1"}, Platforms: []string{"linux/amd64"}, Base: base},
	)
	have := holds{blobs: map[string]bool{old.Layers[0].Digest: true, old.Layers[1].Digest: true}}
	p, got := planned(t, src, have, imagearchive.Selection{Image: 0}, imagearchive.Selection{Image: 1})
	a := scan(t, src)
	m := a.Images[0].Manifests[0]
	if len(m.Layers) != 3 || m.Layers[0].Digest != old.Layers[0].Digest || m.Layers[2].Digest == old.Layers[2].Digest {
		t.Fatalf("the crafted images do not share their base: %+v / %+v", m.Layers, old.Layers)
	}
	if c := p.Images[0]; c.LayersSent != 1 || c.LayersReused != 2 || c.Bytes < 8192 || c.Bytes > 8192+4096 {
		t.Errorf("v2 carried %+v, want 1 layer sent (its 8 KiB top), 2 reused", c)
	}
	if c := p.Images[1]; c.LayersSent != 1 || c.LayersReused != 2 {
		t.Errorf("tool carried %+v, want 1 sent, 2 reused", c)
	}
	for _, im := range got.Images {
		gm := im.Manifests[0]
		if gm.Missing == "" || !have.blobs[gm.Missing] {
			t.Errorf("%s: written archive lacks %q, want a base layer the node has", im.Name(), gm.Missing)
		}
	}
	if !got.HasBlob(m.Layers[2].Digest) || got.HasBlob(m.Layers[0].Digest) || got.HasBlob(m.Layers[1].Digest) {
		t.Error("the written archive does not hold exactly the top layers")
	}
	// A node with nothing gets everything.
	full, _ := planned(t, src, holds{}, imagearchive.Selection{Image: 0})
	if c := full.Images[0]; c.LayersSent != 3 || c.LayersReused != 0 || full.Bytes <= p.Bytes {
		t.Errorf("with nothing on the node: %+v, %d bytes (vs %d)", c, full.Bytes, p.Bytes)
	}
}

// TestPlanSkipsLayersUnpackedUnderAnotherCompression checks that a base
// the node unpacked from a registry's gzip layer, which the archive holds
// uncompressed, is found by its chain of diff IDs and not sent, and that a
// chain broken below (the node lacks the first layer) is not taken.
func TestPlanSkipsLayersUnpackedUnderAnotherCompression(t *testing.T) {
	// The node's content store has the compressed digest, if anything, so
	// only the chain of diff IDs can find the snapshot.
	base := []string{"base-os", "base-runtime"}
	pulled := scan(t, imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"my/app:v1"}, Platforms: []string{"linux/amd64"}, Base: base, Gzip: true})).Images[0].Manifests[0]
	src := imagearchivetest.Docker(imagearchivetest.Image{Refs: []string{"my/app:v2"}, Platforms: []string{"linux/amd64"}, Base: base})
	m := scan(t, src).Images[0].Manifests[0]
	if pulled.Layers[0].Digest == m.Layers[0].Digest || pulled.Layers[0].DiffID != m.Layers[0].DiffID {
		t.Fatalf("want the same layer under two compressions: %+v / %+v", pulled.Layers[0], m.Layers[0])
	}
	chains := imagearchive.ChainIDs([]string{pulled.Layers[0].DiffID, pulled.Layers[1].DiffID})
	have := holds{blobs: map[string]bool{pulled.Layers[0].Digest: true, pulled.Layers[1].Digest: true}, snaps: map[string]bool{chains[0]: true, chains[1]: true}}
	p, _ := planned(t, src, have, imagearchive.Selection{Image: 0})
	if c := p.Images[0]; c.LayersSent != 1 || c.LayersReused != 2 {
		t.Errorf("carried %+v, want the top sent and the unpacked base reused", c)
	}
	otherBase := imagearchive.ChainIDs([]string{"sha256:other", pulled.Layers[1].DiffID})[1]
	p, _ = planned(t, src, holds{snaps: map[string]bool{otherBase: true}}, imagearchive.Selection{Image: 0})
	if c := p.Images[0]; c.LayersReused != 0 {
		t.Errorf("a second layer over another base was taken for this one: %+v", c)
	}
}

// TestPlanWindowsBaseLayer checks that a Windows image whose base layer the
// node's image preloaded sends its own layer only.
func TestPlanWindowsBaseLayer(t *testing.T) {
	base := []string{"servercore-ltsc2022-base"}
	nodeBase := scan(t, imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"mcr.microsoft.com/windows/servercore:ltsc2022"}, Platforms: []string{"windows/amd64:10.0.20348.2655"}, Base: base, Gzip: true})).Images[0].Manifests[0]
	src := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"my/winapp:v1"}, Platforms: []string{"windows/amd64:10.0.20348.2655"}, Base: base, Gzip: true, LayerBytes: 2048})
	have := holds{blobs: map[string]bool{nodeBase.Layers[0].Digest: true}}
	p, _ := planned(t, src, have, imagearchive.Selection{Image: 0})
	if c := p.Images[0]; c.LayersSent != 1 || c.LayersReused != 1 {
		t.Errorf("carried %+v, want the app layer sent and the base reused", c)
	}
}
