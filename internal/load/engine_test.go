package load

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/internal/format/imagearchive"
	"github.com/hwk-dev/hwk/internal/testing/imagearchivetest"
)

// fakeEngine answers the Docker API calls load-image makes, as an engine
// of the given API version does: 1.41 is Debian's Docker 20.10 (classic
// store); 1.52 is Docker 29, whose containerd image store keeps several
// platforms under one name and exports only those asked for.
type fakeEngine struct {
	api     string
	inspect map[string]any
	archive []byte
	// pushes makes the engine push: the archive's first image, with
	// go-containerregistry's client (which, as Docker's, asks the
	// registry about each blob first and sends only those it lacks).
	pushes bool
	// unreachable makes its pushes go nowhere, as from an engine that
	// does not share the host's network.
	unreachable bool
	tags        []string

	mu       sync.Mutex
	requests []string
}

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.URL.Path+"?"+r.URL.RawQuery)
	f.mu.Unlock()
	w.Header().Set("Api-Version", f.api)
	w.Header().Set("Ostype", "linux")
	path := r.URL.Path[strings.Index(r.URL.Path[1:], "/")+1:] // drop /vX.Y
	switch {
	case r.URL.Path == "/_ping":
		_, _ = w.Write([]byte("OK"))
	case strings.HasPrefix(path, "/images/") && strings.HasSuffix(path, "/json"):
		_ = json.NewEncoder(w).Encode(f.inspect)
	case path == "/images/get":
		w.Header().Set("Content-Type", "application/x-tar")
		_, _ = w.Write(f.archive)
	case f.pushes && strings.HasSuffix(path, "/tag") && r.Method == http.MethodPost:
		f.mu.Lock()
		f.tags = append(f.tags, r.URL.Query().Get("repo")+":"+r.URL.Query().Get("tag"))
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	case f.pushes && strings.HasSuffix(path, "/push") && r.Method == http.MethodPost:
		ref := strings.TrimSuffix(strings.TrimPrefix(path, "/images/"), "/push") + ":" + r.URL.Query().Get("tag")
		if f.unreachable {
			ref = "127.0.0.1:1/" + ref[strings.Index(ref, "/")+1:]
		}
		if err := pushArchive(f.archive, ref); err != nil {
			_ = json.NewEncoder(w).Encode(map[string]any{"errorDetail": map[string]string{"message": err.Error()}, "error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "load: digest: sha256:... size: 1"})
	case f.pushes && r.Method == http.MethodDelete && strings.HasPrefix(path, "/images/"):
		f.mu.Lock()
		f.tags = slices.DeleteFunc(f.tags, func(t string) bool { return t == strings.TrimPrefix(path, "/images/") })
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode([]map[string]string{{"Untagged": strings.TrimPrefix(path, "/images/")}})
	default:
		http.Error(w, `{"message":"unexpected"}`, http.StatusNotFound)
	}
}

func (f *fakeEngine) saw(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		if strings.Contains(r, prefix) {
			out = append(out, r)
		}
	}
	return out
}

func engineFor(t *testing.T, f *fakeEngine) Engine {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	e, err := NewEngine(client.WithHost("tcp://"+strings.TrimPrefix(srv.URL, "http://")), client.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestLoadFromContainerdStore checks that for a multi-platform image of
// which Docker 29's containerd store holds only amd64, hwk asks for the
// node's platform only (kind's "content digest not found", kind#3795, comes
// from saving them all), and a second load finds it present by the manifest
// digest, the only digest that store gives.
func TestLoadFromContainerdStore(t *testing.T) {
	d := loadCluster(t, "cp", "linux", "w", "linux")
	archive := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"docker.io/my/app:dev"}, Platforms: []string{"linux/amd64"}})
	a, err := imagearchive.Scan(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	amd64 := a.Images[0].Manifests[0].Digest
	f := &fakeEngine{api: "1.52", archive: archive, inspect: map[string]any{
		"Id": "sha256:" + strings.Repeat("ab", 32), "RepoTags": []string{"my/app:dev"},
		"Os": "linux", "Architecture": "amd64", "Size": len(archive),
		"Manifests": []map[string]any{
			{"ID": amd64, "Kind": "image", "Available": true, "ImageData": map[string]any{"Platform": map[string]string{"os": "linux", "architecture": "amd64"}}},
			{"ID": "sha256:" + strings.Repeat("cd", 32), "Kind": "image", "Available": false, "ImageData": map[string]any{"Platform": map[string]string{"os": "linux", "architecture": "arm64"}}},
			{"ID": "sha256:" + strings.Repeat("ef", 32), "Kind": "attestation", "Available": true},
		},
	}}
	opts := Options{Images: []string{"my/app:dev"}, Engine: engineFor(t, f)}
	res, err := Load(context.Background(), d, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(res); got != "docker.io/my/app:dev@cp=loaded docker.io/my/app:dev@w=loaded" {
		t.Errorf("outcomes = %s", got)
	}
	if got := f.saw("manifests=1"); len(got) != 1 {
		t.Errorf("inspect requests with manifests=1: %v", got)
	}
	saves := f.saw("/images/get")
	if len(saves) != 1 || !strings.Contains(saves[0], "platform=%7B%22architecture%22%3A%22amd64%22%2C%22os%22%3A%22linux%22%7D") {
		t.Errorf("want one save for both nodes, of linux/amd64 only; saw %v", saves)
	}
	for _, n := range []string{"cp", "w"} {
		if got := d.nodes[n].holds()["docker.io/my/app:dev"]; got != "linux/amd64" {
			t.Errorf("%s holds %q", n, got)
		}
	}
	res, err = Load(context.Background(), d, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(res); got != "docker.io/my/app:dev@cp=present docker.io/my/app:dev@w=present" {
		t.Errorf("second load: %s", got)
	}
	if saves := f.saw("/images/get"); len(saves) != 1 {
		t.Errorf("second load saved again: %v", saves)
	}
}

// TestLoadFromClassicStore checks that an engine older than API 1.48 is
// asked for neither manifests nor a platform (its client would refuse to
// send them), and the image ID is the config digest crictl reports.
func TestLoadFromClassicStore(t *testing.T) {
	d := loadCluster(t, "cp", "linux", "win", "2022")
	archive := imagearchivetest.Docker(imagearchivetest.Image{Refs: []string{"my/app:dev"}, Platforms: []string{"linux/amd64"}})
	a, err := imagearchive.Scan(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeEngine{api: "1.41", archive: archive, inspect: map[string]any{
		"Id": a.Images[0].Digest, "RepoTags": []string{"my/app:dev"}, "Os": "linux", "Architecture": "amd64", "Size": len(archive),
	}}
	opts := Options{Images: []string{a.Images[0].Digest[len("sha256:"):][:12]}, Engine: engineFor(t, f)}
	res, err := Load(context.Background(), d, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Loaded by ID: it goes under the tags it has.
	if got := outcomes(res); got != "docker.io/my/app:dev@cp=loaded docker.io/my/app:dev@win=skipped" {
		t.Errorf("outcomes = %s", got)
	}
	for _, r := range f.requests {
		if strings.Contains(r, "platform=") || strings.Contains(r, "manifests=") {
			t.Errorf("API 1.41 engine was sent %s", r)
		}
	}
	if d.nodes["cp"].configs["docker.io/my/app:dev"] != a.Images[0].Digest {
		t.Errorf("node holds config %s, want the engine's ID", d.nodes["cp"].configs["docker.io/my/app:dev"])
	}
	res, err = Load(context.Background(), d, opts)
	if err != nil || outcomes(res) != "docker.io/my/app:dev@cp=present docker.io/my/app:dev@win=skipped" {
		t.Errorf("second load: %v %v", outcomes(res), err)
	}
}

func TestLoadMissingEngineImage(t *testing.T) {
	d := loadCluster(t, "cp", "linux")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		if r.URL.Path == "/_ping" {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"No such image: nope:1"}`))
	}))
	defer srv.Close()
	e, err := NewEngine(client.WithHost("tcp://" + strings.TrimPrefix(srv.URL, "http://")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Load(context.Background(), d, Options{Images: []string{"nope:1"}, Engine: e})
	if err == nil || !strings.Contains(err.Error(), "image nope:1 is not in the local Docker engine") || !strings.Contains(err.Error(), "nothing was loaded") {
		t.Errorf("err = %v", err)
	}
	if d.nodes["cp"].imports != 0 {
		t.Error("a node was sent images")
	}
}

// brokenSave is an engine save that stops, with an error, right before
// the archive's end-of-archive marker: a tar reader given what came would
// take it for the whole archive.
type brokenSave struct {
	Engine
	archive []byte
}

type failingReader struct {
	r io.Reader
}

func (f failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errors.New("unexpected EOF from the engine")
	}
	return n, err
}

func (b brokenSave) Save(context.Context, []string, []imagearchive.Platform) (io.ReadCloser, error) {
	return io.NopCloser(failingReader{bytes.NewReader(b.archive[:len(b.archive)-1024])}), nil
}

func TestLoadBrokenStreamLoadsNothing(t *testing.T) {
	d := loadCluster(t, "cp", "linux", "w", "linux")
	archive := imagearchivetest.Docker(imagearchivetest.Image{Refs: []string{"my/app:dev"}, Platforms: []string{"linux/amd64"}})
	if _, err := imagearchive.Scan(bytes.NewReader(archive[:len(archive)-1024])); err != nil {
		t.Fatalf("the control: an archive without its end marker should read as whole, got %v", err)
	}
	f := &fakeEngine{api: "1.41", inspect: map[string]any{"Id": "sha256:" + strings.Repeat("12", 32), "RepoTags": []string{"my/app:dev"}, "Os": "linux", "Architecture": "amd64"}}
	_, err := Load(context.Background(), d, Options{Images: []string{"my/app:dev"}, Engine: brokenSave{Engine: engineFor(t, f), archive: archive}})
	if err == nil || !strings.Contains(err.Error(), "unexpected EOF from the engine") {
		t.Errorf("err = %v", err)
	}
	for n, f := range d.nodes {
		if len(f.holds()) != 0 {
			t.Errorf("%s holds %v from a broken stream", n, f.holds())
		}
	}
}

// loadBase loads my/app:v1 (see storeImage) from an archive into nodes
// (all when none are named), so that they hold the base of v2.
func loadBase(t *testing.T, d *fakeCluster, gz bool, nodes ...string) {
	t.Helper()
	v1, _, _ := storeImage(t, "v1", gz)
	if _, err := Load(context.Background(), d, Options{Archives: []string{writeArchive(t, v1)}, Nodes: nodes}); err != nil {
		t.Fatal(err)
	}
}

// storeImage returns my/app:VERSION as Docker's containerd store saves it: an
// OCI layout of gzip layers over a two-layer base, and the inspect
// answer of API 1.52 for it.
func storeImage(t *testing.T, version string, gz bool) (archive []byte, inspect map[string]any, m imagearchive.Manifest) {
	t.Helper()
	archive = imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"docker.io/my/app:" + version}, Platforms: []string{"linux/amd64"},
		Base: []string{"app-base-os", "app-base-deps"}, Seed: "app-" + version, LayerBytes: 32 << 10, Gzip: gz})
	a, err := imagearchive.Scan(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	m = a.Images[0].Manifests[0]
	var diffIDs []string
	for _, l := range m.Layers {
		diffIDs = append(diffIDs, l.DiffID)
	}
	inspect = map[string]any{
		"Id": m.Digest, "RepoTags": []string{"my/app:" + version}, "Os": "linux", "Architecture": "amd64", "Size": len(archive),
		"RootFS": map[string]any{"Type": "layers", "Layers": diffIDs},
		"Manifests": []map[string]any{
			{"ID": m.Digest, "Kind": "image", "Available": true, "ImageData": map[string]any{"Platform": map[string]string{"os": "linux", "architecture": "amd64"}}},
		},
	}
	return archive, inspect, m
}

// TestLoadContainerdStoreRebuild checks that a rebuilt image in Docker's
// containerd store is saved once and filtered as it streams, per node: the
// node holding the base gets the new top layer only, the node holding
// nothing gets all of it, and the result reports each. Nothing is spooled.
func TestLoadContainerdStoreRebuild(t *testing.T) {
	d := loadCluster(t, "cp", "linux", "w", "linux")
	ctx := context.Background()
	loadBase(t, d, true, "cp")
	v2, inspect, m := storeImage(t, "v2", true)
	f := &fakeEngine{api: "1.52", archive: v2, inspect: inspect}
	res, err := Load(ctx, d, Options{Images: []string{"my/app:v2"}, Engine: engineFor(t, f)})
	if err != nil {
		t.Fatal(err)
	}
	cp, w := res.Images[0].Nodes[0], res.Images[0].Nodes[1]
	if cp.Outcome != Loaded || cp.LayersSent != 1 || cp.LayersReused != 2 || cp.Bytes < m.Layers[2].Size || cp.Bytes > m.Layers[2].Size+8<<10 {
		t.Errorf("cp: %+v, want 1 layer sent (%d bytes and the config), 2 reused", cp, m.Layers[2].Size)
	}
	if w.Outcome != Loaded || w.LayersSent != 3 || w.LayersReused != 0 {
		t.Errorf("w: %+v, want all 3 layers sent", w)
	}
	if got := d.nodes["cp"].received; len(got[len(got)-1]) != 1 || got[len(got)-1][0] != m.Layers[2].Digest {
		t.Errorf("cp received %v, want the top layer only", got[len(got)-1])
	}
	if got := d.nodes["w"].received; len(got[len(got)-1]) != 3 {
		t.Errorf("w received %v, want 3 layers", got[len(got)-1])
	}
	for _, n := range []string{"cp", "w"} {
		if _, ok := d.nodes[n].holds()["docker.io/my/app:v2"]; !ok {
			t.Errorf("%s does not hold my/app:v2", n)
		}
	}
	if n := len(f.saw("/images/get")); n != 1 {
		t.Errorf("the engine saved %d times, want once for both nodes", n)
	}
}

// TestLoadContainerdStoreCorruptTopLoadsNothing checks that with the base
// left out, a top layer that does not match its digest fails the load on the
// node, which imports nothing.
func TestLoadContainerdStoreCorruptTopLoadsNothing(t *testing.T) {
	d := loadCluster(t, "cp", "linux")
	ctx := context.Background()
	loadBase(t, d, false)
	before := d.nodes["cp"].imports
	v2, inspect, _ := storeImage(t, "v2", false)
	f := &fakeEngine{api: "1.52", archive: imagearchivetest.Corrupt(v2, []byte("app-v2-linux/amd64app-v2")), inspect: inspect}
	res, err := Load(ctx, d, Options{Images: []string{"my/app:v2"}, Engine: engineFor(t, f)})
	if err == nil || !strings.Contains(err.Error(), "archive is corrupt") {
		t.Fatalf("Load = %v, want a corrupt-archive error", err)
	}
	if nl := res.Images[0].Nodes[0]; nl.Outcome != Failed {
		t.Errorf("cp: %+v, want failed", nl)
	}
	if _, ok := d.nodes["cp"].holds()["docker.io/my/app:v2"]; ok {
		t.Error("the corrupt image is on the node")
	}
	if got := d.nodes["cp"].imports - before; got > 1 {
		t.Errorf("the node imported %d times", got)
	}
}

// TestLoadClassicStoreOCISaveUsesUnpackedChains checks that a node that
// unpacked the base from a registry's gzip blobs, and so has its chains but
// not the uncompressed blobs named by diff ID that Docker 25's classic store
// saves, still gets the top layer only.
func TestLoadClassicStoreOCISaveUsesUnpackedChains(t *testing.T) {
	d := loadCluster(t, "cp", "linux")
	v2, inspect, m := storeImage(t, "v2", false)
	delete(inspect, "Manifests")
	chains := imagearchive.ChainIDs([]string{m.Layers[0].DiffID, m.Layers[1].DiffID})
	d.nodes["cp"].snaps[chains[0]], d.nodes["cp"].snaps[chains[1]] = true, true
	f := &fakeEngine{api: "1.44", archive: v2, inspect: inspect}
	res, err := Load(context.Background(), d, Options{Images: []string{"my/app:v2"}, Engine: engineFor(t, f)})
	if err != nil {
		t.Fatal(err)
	}
	if nl := res.Images[0].Nodes[0]; nl.LayersSent != 1 || nl.LayersReused != 2 {
		t.Errorf("cp: %+v, want the top sent and the unpacked base reused", nl)
	}
	if got := d.nodes["cp"].received; len(got[len(got)-1]) != 1 || got[len(got)-1][0] != m.Layers[2].Digest {
		t.Errorf("cp received %v, want the top layer only", got[len(got)-1])
	}
}

// pushArchive pushes the first image of an OCI layout tar to ref.
func pushArchive(archive []byte, ref string) error {
	dir, err := os.MkdirTemp("", "hwk-fake-push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return err
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return err
	}
	return remote.Write(r, img)
}

// TestLoadContainerdStorePushesOnlyMissing checks that with Docker's
// containerd store, a rebuilt image of which the node holds the base comes
// by a push to hwk's own registry, which tells the engine the base is there:
// the engine sends the new layer and config only, never saves, and the node
// gets the one layer; the temporary tag is gone afterwards.
func TestLoadContainerdStorePushesOnlyMissing(t *testing.T) {
	d := loadCluster(t, "cp", "linux")
	ctx := context.Background()
	loadBase(t, d, true)
	v2, inspect, m := storeImage(t, "v2", true)
	// The engine knows of an arm64 platform it never pulled, listed
	// first: the node's is the second.
	inspect["Manifests"] = append([]map[string]any{{"ID": "sha256:" + strings.Repeat("cd", 32), "Kind": "image", "Available": false,
		"ImageData": map[string]any{"Platform": map[string]string{"os": "linux", "architecture": "arm64"}}}}, inspect["Manifests"].([]map[string]any)...)
	f := &fakeEngine{api: "1.52", archive: v2, inspect: inspect, pushes: true}
	res, err := Load(ctx, d, Options{Images: []string{"my/app:v2"}, Engine: engineFor(t, f)})
	if err != nil {
		t.Fatal(err)
	}
	if nl := res.Images[0].Nodes[0]; nl.Outcome != Loaded || nl.LayersSent != 1 || nl.LayersReused != 2 || nl.Bytes < m.Layers[2].Size || nl.Bytes > m.Layers[2].Size+8<<10 {
		t.Errorf("cp: %+v, want 1 layer sent (%d bytes and the config), 2 reused", nl, m.Layers[2].Size)
	}
	if got := d.nodes["cp"].received; len(got[len(got)-1]) != 1 || got[len(got)-1][0] != m.Layers[2].Digest {
		t.Errorf("cp received %v, want the top layer only", got[len(got)-1])
	}
	if _, ok := d.nodes["cp"].holds()["docker.io/my/app:v2"]; !ok {
		t.Error("cp does not hold my/app:v2")
	}
	if saves, pushes := f.saw("/images/get"), f.saw("/push"); len(saves) != 0 || len(pushes) != 1 || !strings.Contains(pushes[0], "platform=") {
		t.Errorf("saves %v, pushes %v; want one push of the node's platform and no save", saves, pushes)
	}
	if len(f.tags) != 0 {
		t.Errorf("tags left in the engine: %v", f.tags)
	}
}

// TestLoadContainerdStorePushUnreachable checks that an engine that cannot
// reach hwk's registry (Docker Desktop's VM, a rootless engine) fails the
// push, and the image comes by a filtered save instead.
func TestLoadContainerdStorePushUnreachable(t *testing.T) {
	d := loadCluster(t, "cp", "linux")
	ctx := context.Background()
	loadBase(t, d, true)
	v2, inspect, m := storeImage(t, "v2", true)
	// The push goes to a port nothing listens on from the engine's side.
	f := &fakeEngine{api: "1.52", archive: v2, inspect: inspect, pushes: true, unreachable: true}
	res, err := Load(ctx, d, Options{Images: []string{"my/app:v2"}, Engine: engineFor(t, f)})
	if err != nil {
		t.Fatal(err)
	}
	if nl := res.Images[0].Nodes[0]; nl.LayersSent != 1 || nl.LayersReused != 2 {
		t.Errorf("cp: %+v, want 1 layer sent, 2 reused", nl)
	}
	if got := d.nodes["cp"].received; len(got[len(got)-1]) != 1 || got[len(got)-1][0] != m.Layers[2].Digest {
		t.Errorf("cp received %v, want the top layer only", got[len(got)-1])
	}
	if saves := f.saw("/images/get"); len(saves) != 1 {
		t.Errorf("saves %v, want one after the failed push", saves)
	}
	if len(f.tags) != 0 {
		t.Errorf("tags left in the engine: %v", f.tags)
	}
}

// TestLoadContainerdStorePushForNodesThatDiffer checks that when one node
// holds the base and the other nothing, the registry answers "present" only
// for what both hold, so the engine sends everything once, and each node
// still gets only what it lacks.
func TestLoadContainerdStorePushForNodesThatDiffer(t *testing.T) {
	d := loadCluster(t, "cp", "linux", "w", "linux")
	ctx := context.Background()
	loadBase(t, d, true, "cp")
	v2, inspect, m := storeImage(t, "v2", true)
	f := &fakeEngine{api: "1.52", archive: v2, inspect: inspect, pushes: true}
	res, err := Load(ctx, d, Options{Images: []string{"my/app:v2"}, Engine: engineFor(t, f)})
	if err != nil {
		t.Fatal(err)
	}
	if cp, w := res.Images[0].Nodes[0], res.Images[0].Nodes[1]; cp.LayersSent != 1 || cp.LayersReused != 2 || w.LayersSent != 3 || w.LayersReused != 0 {
		t.Errorf("cp %+v, w %+v; want cp 1 sent 2 reused, w 3 sent", cp, w)
	}
	if got := d.nodes["cp"].received; len(got[len(got)-1]) != 1 || got[len(got)-1][0] != m.Layers[2].Digest {
		t.Errorf("cp received %v, want the top layer only", got[len(got)-1])
	}
	if got := d.nodes["w"].received; len(got[len(got)-1]) != 3 {
		t.Errorf("w received %v, want all 3 layers", got[len(got)-1])
	}
	if saves := f.saw("/images/get"); len(saves) != 0 {
		t.Errorf("saves %v, want none", saves)
	}
}
