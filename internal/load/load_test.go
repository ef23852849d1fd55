package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/hwk-dev/hwk/internal/format/imagearchive"
	"github.com/hwk-dev/hwk/internal/testing/imagearchivetest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// fakeContainerd is a node's containerd as ctr and crictl show it. An
// import reads the archive the way containerd's importer does (a whole,
// valid archive or nothing), so what it holds afterwards is what a real
// node would.
type fakeContainerd struct {
	name string
	os   config.OS

	mu       sync.Mutex
	targets  map[string]string // ref → manifest digest
	configs  map[string]string // ref → config digest
	platform map[string]string // ref → platform imported
	files    map[string][]byte // Windows spool files
	blobs    map[string]bool   // the content store, by digest
	snaps    map[string]bool   // committed snapshots, by chain ID
	imports  int
	spooled  []string
	// received are the layer blobs each import's archive carried.
	received [][]string
	// beforeImport, when set, runs as an import begins (a test's
	// change to the node between its inventory and the import).
	beforeImport func()
}

func newFakeContainerd(name string, os config.OS) *fakeContainerd {
	return &fakeContainerd{name: name, os: os, targets: map[string]string{}, configs: map[string]string{},
		platform: map[string]string{}, files: map[string][]byte{}, blobs: map[string]bool{}, snaps: map[string]bool{}}
}

var (
	psImportOf = regexp.MustCompile(`'images' 'import' .*'([^']+\.tar)'`)
)

func (f *fakeContainerd) Run(_ context.Context, cmd node.Cmd) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, _ := node.ScriptOf(cmd.Args)
	switch {
	case strings.Contains(s, "images ls"):
		f.inventory(cmd.Stdout)
		return nil
	case strings.Contains(s, "'images' 'import'"):
		file := psImportOf.FindStringSubmatch(s)[1]
		data := f.files[file]
		delete(f.files, file) // the script's finally
		return f.load(bytes.NewReader(data), cmd.Stderr)
	case len(cmd.Args) > 4 && cmd.Args[3] == "images" && cmd.Args[4] == "import":
		// As docker exec and SSH do, a read error ends the command's
		// input like EOF: the command sees only what came.
		data, _ := io.ReadAll(cmd.Stdin)
		return f.load(bytes.NewReader(data), cmd.Stderr)
	case len(cmd.Args) > 6 && cmd.Args[4] == "tag":
		src, dst := cmd.Args[6], cmd.Args[7]
		f.targets[dst], f.configs[dst], f.platform[dst] = f.targets[src], f.configs[src], f.platform[src]
		return nil
	}
	return fmt.Errorf("fake containerd on %s: unexpected command %q", f.name, cmd.Args)
}

// WriteFile takes a spool file as a Windows node's sshd does, over SFTP
// (only Windows nodes are sent files).
func (f *fakeContainerd) WriteFile(_ context.Context, r io.Reader, p string, _ fs.FileMode) error {
	if f.os != config.Windows || !strings.HasPrefix(p, "/C:/") {
		return fmt.Errorf("fake containerd on %s: unexpected file %s", f.name, p)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	dst := strings.ReplaceAll(p[1:], "/", `\`)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[dst] = data
	f.spooled = append(f.spooled, dst)
	return nil
}

func (f *fakeContainerd) inventory(w io.Writer) {
	arch := "x86_64"
	if f.os == config.Windows {
		arch = "AMD64"
	}
	fmt.Fprintf(w, "%s\n---\nREF TYPE DIGEST SIZE PLATFORMS LABELS\n", arch)
	ids := map[string][]string{}
	var refs []string
	for ref := range f.targets {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	for _, ref := range refs {
		fmt.Fprintf(w, "%s application/vnd.oci.image.manifest.v1+json %s 1.0KiB %s io.cri-containerd.image=managed\n", ref, f.targets[ref], f.platform[ref])
		ids[f.configs[ref]] = append(ids[f.configs[ref]], ref)
	}
	type img struct {
		ID       string   `json:"id"`
		RepoTags []string `json:"repoTags"`
	}
	list := struct {
		Images []img `json:"images"`
	}{Images: []img{}}
	for id, tags := range ids {
		list.Images = append(list.Images, img{ID: id, RepoTags: tags})
	}
	fmt.Fprint(w, "---\n")
	_ = json.NewEncoder(w).Encode(list)
	// ctr content ls -q, then ctr snapshots ls.
	fmt.Fprint(w, "---\n")
	for _, d := range sortedKeys(f.blobs) {
		fmt.Fprintln(w, d)
	}
	fmt.Fprint(w, "---\nKEY PARENT KIND\n")
	for _, c := range sortedKeys(f.snaps) {
		fmt.Fprintf(w, "%s  Committed\n", c)
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (f *fakeContainerd) load(r io.Reader, stderr io.Writer) error {
	f.imports++
	if f.beforeImport != nil {
		f.beforeImport()
	}
	a, err := imagearchive.Scan(r)
	if err != nil {
		fmt.Fprintf(stderr, "ctr: %v\n", err)
		return &node.ExitError{Code: 1}
	}
	// As containerd's import and unpack: a layer the archive lacks must
	// be in the content store, or its chain already unpacked.
	var got []string
	for _, im := range a.Images {
		if len(im.Manifests) != 1 {
			fmt.Fprintf(stderr, "fake: hwk sent %d platforms of %s, want exactly the node's\n", len(im.Manifests), im.Name())
			return &node.ExitError{Code: 1}
		}
		m := im.Manifests[0]
		var diffIDs []string
		for _, l := range m.Layers {
			diffIDs = append(diffIDs, l.DiffID)
		}
		chains := imagearchive.ChainIDs(diffIDs)
		for i, l := range m.Layers {
			switch {
			case a.HasBlob(l.Digest):
				got = append(got, l.Digest)
			case !f.blobs[l.Digest] && !f.snaps[chains[i]]:
				fmt.Fprintf(stderr, "ctr: content digest %s: not found\n", l.Digest)
				return &node.ExitError{Code: 1}
			}
		}
	}
	f.received = append(f.received, got)
	for _, im := range a.Images {
		m := im.Manifests[0]
		var diffIDs []string
		for _, l := range m.Layers {
			diffIDs = append(diffIDs, l.DiffID)
			if a.HasBlob(l.Digest) {
				f.blobs[l.Digest] = true
			}
		}
		for _, c := range imagearchive.ChainIDs(diffIDs) {
			f.snaps[c] = true
		}
		f.blobs[m.Config], f.blobs[m.Digest] = true, true
		for _, ref := range im.Refs {
			f.targets[ref], f.configs[ref], f.platform[ref] = m.Digest, m.Config, m.Platform.String()
		}
	}
	return nil
}

func (f *fakeContainerd) holds() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for ref, p := range f.platform {
		out[ref] = p
	}
	return out
}

// fakeCluster is a cluster whose nodes run a fake containerd.
type fakeCluster struct {
	list  []config.Node
	nodes map[string]*fakeContainerd
}

func (c *fakeCluster) Lock(want []string) ([]config.Node, func(), error) {
	if len(want) == 0 {
		return c.list, func() {}, nil
	}
	var out []config.Node
	for _, w := range want {
		i := slices.IndexFunc(c.list, func(n config.Node) bool { return n.Name == w })
		if i < 0 {
			return nil, nil, fmt.Errorf("fake cluster has no node %q", w)
		}
		out = append(out, c.list[i])
	}
	return out, func() {}, nil
}

func (c *fakeCluster) Open(_ context.Context, n config.Node) (*node.Node, error) {
	f := c.nodes[n.Name]
	if f == nil {
		return nil, fmt.Errorf("no node %s", n.Name)
	}
	return node.New(n.Name, f.os, f), nil
}

// loadCluster makes a cluster with the given nodes (name → "linux",
// "2022" or "2025") and fake containerds for them.
func loadCluster(t *testing.T, nodes ...string) *fakeCluster {
	t.Helper()
	c := &fakeCluster{nodes: map[string]*fakeContainerd{}}
	for i := 0; i < len(nodes); i += 2 {
		n := config.Node{Name: nodes[i], OS: config.Linux}
		if v := nodes[i+1]; v != "linux" {
			n.OS, n.WindowsVersion = config.Windows, v
		}
		c.list = append(c.list, n)
		c.nodes[n.Name] = newFakeContainerd(n.Name, n.OS)
	}
	return c
}

func writeArchive(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "images.tar")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func outcomes(res *Result) string {
	var s []string
	for _, im := range res.Images {
		for _, n := range im.Nodes {
			s = append(s, fmt.Sprintf("%s@%s=%s", im.Image, n.Node, n.Outcome))
		}
	}
	return strings.Join(s, " ")
}

const (
	linuxAMD64 = "linux/amd64"
	win2022    = "windows/amd64:10.0.20348.2849"
	win2025    = "windows/amd64:10.0.26100.1742"
)

func TestLoadRoutesByPlatform(t *testing.T) {
	d := loadCluster(t, "cp", "linux", "win22", "2022", "win25", "2025")
	archive := writeArchive(t, imagearchivetest.OCI(
		imagearchivetest.Image{Refs: []string{"example.com/linux-only:1"}, Platforms: []string{linuxAMD64}},
		imagearchivetest.Image{Refs: []string{"example.com/win:ltsc2022"}, Platforms: []string{win2022}},
		imagearchivetest.Image{Refs: []string{"example.com/multi:1"}, Platforms: []string{linuxAMD64, "linux/arm64", win2022, win2025}},
	))
	res, err := Load(context.Background(), d, Options{Archives: []string{archive}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := "example.com/linux-only:1@cp=loaded example.com/linux-only:1@win22=skipped example.com/linux-only:1@win25=skipped " +
		"example.com/win:ltsc2022@cp=skipped example.com/win:ltsc2022@win22=loaded example.com/win:ltsc2022@win25=loaded " +
		"example.com/multi:1@cp=loaded example.com/multi:1@win22=loaded example.com/multi:1@win25=loaded"
	if got := outcomes(res); got != want {
		t.Errorf("outcomes:\n got %s\nwant %s", got, want)
	}
	for node, want := range map[string]map[string]string{
		"cp":    {"example.com/linux-only:1": linuxAMD64, "example.com/multi:1": linuxAMD64},
		"win22": {"example.com/win:ltsc2022": win2022, "example.com/multi:1": win2022},
		// A 2025 node runs ltsc2022 images, and of a multi-platform
		// image gets the newest build it runs.
		"win25": {"example.com/win:ltsc2022": win2022, "example.com/multi:1": win2025},
	} {
		if got := d.nodes[node].holds(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s holds %v, want %v", node, got, want)
		}
	}
	if got := res.Images[0].Nodes[1].Reason; got != "a linux image cannot run on a windows node" {
		t.Errorf("skip reason = %q", got)
	}
	// The Windows nodes got their archives through a spool file that the
	// import removed.
	for _, n := range []string{"win22", "win25"} {
		f := d.nodes[n]
		if len(f.spooled) != 1 || len(f.files) != 0 || !strings.HasPrefix(f.spooled[0], `C:\ProgramData\hwk\images\load-`) {
			t.Errorf("%s spooled %v and kept %d files", n, f.spooled, len(f.files))
		}
	}

	// Again: everything is there, nothing is sent.
	res, err = Load(context.Background(), d, Options{Archives: []string{archive}})
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(res); strings.Contains(got, "=loaded") {
		t.Errorf("second load sent images: %s", got)
	}
	for n, f := range d.nodes {
		if f.imports != 1 {
			t.Errorf("%s imported %d times, want once", n, f.imports)
		}
	}
}

func TestLoadRefusesWhatNoNodeRuns(t *testing.T) {
	d := loadCluster(t, "cp", "linux", "win22", "2022")
	archive := writeArchive(t, imagearchivetest.OCI(
		imagearchivetest.Image{Refs: []string{"example.com/ok:1"}, Platforms: []string{linuxAMD64}},
		imagearchivetest.Image{Refs: []string{"example.com/new:ltsc2025"}, Platforms: []string{win2025}},
	))
	_, err := Load(context.Background(), d, Options{Archives: []string{archive}})
	if err == nil {
		t.Fatal("an ltsc2025 image loaded into a cluster whose only Windows node is 2022")
	}
	for _, want := range []string{
		"image example.com/new:ltsc2025 (windows/amd64 ltsc2025 (10.0.26100.1742)) fits none of the nodes",
		"cp (linux/amd64)", "win22 (windows/amd64 ltsc2022 (10.0.20348))",
		"nothing was loaded",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	// Why, for the Windows node.
	res, err := Load(context.Background(), d, Options{Archives: []string{archive}, Nodes: []string{"win22"}})
	if err == nil || !strings.Contains(err.Error(), "built for a newer Windows (ltsc2025, build 26100) than the node's ltsc2022, build 20348") {
		t.Errorf("--nodes win22: %v, %v", res, err)
	}
	for n, f := range d.nodes {
		if f.imports != 0 || len(f.spooled) != 0 {
			t.Errorf("%s was sent images although the load failed", n)
		}
	}
}

func TestLoadCorruptArchiveLoadsNothing(t *testing.T) {
	d := loadCluster(t, "cp", "linux", "w1", "linux")
	good := imagearchivetest.OCI(
		imagearchivetest.Image{Refs: []string{"example.com/a:1"}, Platforms: []string{linuxAMD64}, LayerBytes: 64 << 10},
		imagearchivetest.Image{Refs: []string{"example.com/b:1"}, Platforms: []string{linuxAMD64}, LayerBytes: 64 << 10},
	)
	for name, data := range map[string][]byte{
		"flipped byte": imagearchivetest.Corrupt(good, []byte("1-linux/amd641-linux")),
		"cut short":    good[:len(good)*2/3],
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(context.Background(), d, Options{Archives: []string{writeArchive(t, data)}})
			if err == nil || !strings.Contains(err.Error(), "nothing was loaded") {
				t.Fatalf("Load = %v, want a corrupt-archive error", err)
			}
			for n, f := range d.nodes {
				if f.imports != 0 || len(f.holds()) != 0 {
					t.Errorf("%s got images from a corrupt archive", n)
				}
			}
		})
	}
}

func TestLoadTagsWhatIsThereUnderAnotherName(t *testing.T) {
	d := loadCluster(t, "cp", "linux")
	first := imagearchivetest.Docker(imagearchivetest.Image{Refs: []string{"my/app:dev"}, Platforms: []string{linuxAMD64}})
	if _, err := Load(context.Background(), d, Options{Archives: []string{writeArchive(t, first)}}); err != nil {
		t.Fatal(err)
	}
	// The same image under a second name.
	second := imagearchivetest.Docker(imagearchivetest.Image{Refs: []string{"my/app:dev", "my/app:v2"}, Platforms: []string{linuxAMD64}})
	res, err := Load(context.Background(), d, Options{Archives: []string{writeArchive(t, second)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(res); got != "docker.io/my/app:dev@cp=tagged" {
		t.Errorf("outcomes = %s", got)
	}
	f := d.nodes["cp"]
	if f.imports != 1 || f.targets["docker.io/my/app:v2"] != f.targets["docker.io/my/app:dev"] {
		t.Errorf("imports = %d, targets = %v", f.imports, f.targets)
	}
}

// rebuilt returns a classic docker save of my/app at version v: two base
// layers every version shares, and a top layer of its own.
func rebuilt(v string, top int) []byte {
	return imagearchivetest.Docker(imagearchivetest.Image{Refs: []string{"my/app:" + v}, Platforms: []string{linuxAMD64},
		Base: []string{"app-base-os", "app-base-deps"}, LayerBytes: top, Seed: "app-" + v})
}

// TestLoadSendsOnlyMissingLayers checks that the rebuilt image goes with
// its new top layer only to each node, as the result reports; the node's
// containerd (the fake checks as containerd does) takes the archive
// without the layers it has, and holds the new version.
func TestLoadSendsOnlyMissingLayers(t *testing.T) {
	d := loadCluster(t, "cp", "linux", "w1", "linux")
	ctx := context.Background()
	res, err := Load(ctx, d, Options{Archives: []string{writeArchive(t, rebuilt("v1", 64<<10))}})
	if err != nil {
		t.Fatal(err)
	}
	if nl := res.Images[0].Nodes[0]; nl.LayersSent != 3 || nl.LayersReused != 0 {
		t.Errorf("first load: %+v, want all 3 layers sent", nl)
	}
	v2 := rebuilt("v2", 64<<10)
	res, err = Load(ctx, d, Options{Archives: []string{writeArchive(t, v2)}})
	if err != nil {
		t.Fatal(err)
	}
	top := scanBytes(t, v2).Images[0].Manifests[0].Layers[2]
	for j, n := range []string{"cp", "w1"} {
		nl := res.Images[0].Nodes[j]
		if nl.Outcome != Loaded || nl.LayersSent != 1 || nl.LayersReused != 2 || nl.Bytes < top.Size || nl.Bytes > top.Size+8<<10 {
			t.Errorf("%s: %+v, want 1 layer sent (%d bytes and the config), 2 reused", n, nl, top.Size)
		}
		f := d.nodes[n]
		if got := f.received[len(f.received)-1]; len(got) != 1 || got[0] != top.Digest {
			t.Errorf("%s received %v, want only the top layer %s", n, got, top.Digest)
		}
		if _, ok := f.holds()["docker.io/my/app:v2"]; !ok {
			t.Errorf("%s does not hold my/app:v2", n)
		}
	}
}

// TestLoadReusedBaseCorruptTopLoadsNothing checks that with the base reused,
// a corrupt top layer still fails the whole load and no node imports
// anything.
func TestLoadReusedBaseCorruptTopLoadsNothing(t *testing.T) {
	d := loadCluster(t, "cp", "linux")
	ctx := context.Background()
	if _, err := Load(ctx, d, Options{Archives: []string{writeArchive(t, rebuilt("v1", 0))}}); err != nil {
		t.Fatal(err)
	}
	before := d.nodes["cp"].imports
	bad := imagearchivetest.Corrupt(rebuilt("v2", 0), []byte("app-v2-linux/amd64app-v2"))
	_, err := Load(ctx, d, Options{Archives: []string{writeArchive(t, bad)}})
	if err == nil || !strings.Contains(err.Error(), "archive is corrupt") || !strings.Contains(err.Error(), "nothing was loaded") {
		t.Fatalf("Load = %v, want a corrupt-archive error", err)
	}
	if f := d.nodes["cp"]; f.imports != before {
		t.Errorf("the node imported %d times after the corrupt archive", f.imports-before)
	}
	if _, ok := d.nodes["cp"].holds()["docker.io/my/app:v2"]; ok {
		t.Error("the corrupt image is on the node")
	}
}

// TestLoadResendsWhatTheNodeLostMeanwhile checks that when a layer the node
// had when asked is gone by the import (its containerd collected it), the
// import fails for want of it and hwk sends the whole image once more.
func TestLoadResendsWhatTheNodeLostMeanwhile(t *testing.T) {
	d := loadCluster(t, "cp", "linux")
	ctx := context.Background()
	if _, err := Load(ctx, d, Options{Archives: []string{writeArchive(t, rebuilt("v1", 0))}}); err != nil {
		t.Fatal(err)
	}
	f := d.nodes["cp"]
	f.beforeImport = func() {
		f.blobs, f.snaps, f.beforeImport = map[string]bool{}, map[string]bool{}, nil
	}
	res, err := Load(ctx, d, Options{Archives: []string{writeArchive(t, rebuilt("v2", 0))}})
	if err != nil {
		t.Fatal(err)
	}
	if nl := res.Images[0].Nodes[0]; nl.Outcome != Loaded || nl.LayersSent != 3 || nl.LayersReused != 0 {
		t.Errorf("after the retry: %+v, want all 3 layers sent", nl)
	}
	if got := f.received[len(f.received)-1]; len(got) != 3 {
		t.Errorf("the retry carried %d layers, want 3", len(got))
	}
}

// TestLoadFiguresPerImage checks that images sharing one stream each report
// their own bytes, not the stream's.
func TestLoadFiguresPerImage(t *testing.T) {
	d := loadCluster(t, "cp", "linux")
	archive := imagearchivetest.OCI(
		imagearchivetest.Image{Refs: []string{"example.com/big:1"}, Platforms: []string{linuxAMD64}, LayerBytes: 1 << 20},
		imagearchivetest.Image{Refs: []string{"example.com/small:1"}, Platforms: []string{linuxAMD64}, LayerBytes: 2 << 10},
	)
	res, err := Load(context.Background(), d, Options{Archives: []string{writeArchive(t, archive)}})
	if err != nil {
		t.Fatal(err)
	}
	big, small := res.Images[0].Nodes[0].Bytes, res.Images[1].Nodes[0].Bytes
	if big < 1<<20 || big > 1<<20+16<<10 || small < 2<<10 || small > 16<<10 {
		t.Errorf("bytes: big %d, small %d; want each its own (1 MiB and 2 KiB, with tar headers and configs)", big, small)
	}
}

// TestLoadEngineImageSendsOnlyMissingLayers checks that an engine image
// (classic store) of which the node has the base goes through a saved file
// and sends its top layer only.
func TestLoadEngineImageSendsOnlyMissingLayers(t *testing.T) {
	d := loadCluster(t, "cp", "linux")
	ctx := context.Background()
	if _, err := Load(ctx, d, Options{Archives: []string{writeArchive(t, rebuilt("v1", 0))}}); err != nil {
		t.Fatal(err)
	}
	v2 := rebuilt("v2", 32<<10)
	a := scanBytes(t, v2)
	m := a.Images[0].Manifests[0]
	var diffIDs []string
	for _, l := range m.Layers {
		diffIDs = append(diffIDs, l.DiffID)
	}
	f := &fakeEngine{api: "1.41", archive: v2, inspect: map[string]any{
		"Id": a.Images[0].Digest, "RepoTags": []string{"my/app:v2"}, "Os": "linux", "Architecture": "amd64", "Size": len(v2),
		"RootFS": map[string]any{"Type": "layers", "Layers": diffIDs},
	}}
	res, err := Load(ctx, d, Options{Images: []string{"my/app:v2"}, Engine: engineFor(t, f)})
	if err != nil {
		t.Fatal(err)
	}
	if nl := res.Images[0].Nodes[0]; nl.Outcome != Loaded || nl.LayersSent != 1 || nl.LayersReused != 2 {
		t.Errorf("engine image: %+v, want 1 layer sent, 2 reused", nl)
	}
	if got := d.nodes["cp"].received; len(got[len(got)-1]) != 1 || got[len(got)-1][0] != m.Layers[2].Digest {
		t.Errorf("received %v, want the top layer only", got[len(got)-1])
	}
	if n := len(f.saw("/images/get")); n != 1 {
		t.Errorf("the engine saved %d times, want once", n)
	}
}

func scanBytes(t *testing.T, data []byte) *imagearchive.Archive {
	t.Helper()
	a, err := imagearchive.Scan(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestLoadWindowsImageOnItsPreloadedBase checks that a Windows node whose
// image preloaded the base layer (as the Windows node image preloads
// servercore and nanoserver) gets the app's own layer only, through its
// spool file.
func TestLoadWindowsImageOnItsPreloadedBase(t *testing.T) {
	d := loadCluster(t, "cp", "linux", "win22", "2022")
	base := []string{"servercore-ltsc2022"}
	preloaded := scanBytes(t, imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"mcr.microsoft.com/windows/servercore:ltsc2022"},
		Platforms: []string{win2022}, Base: base, Gzip: true})).Images[0].Manifests[0]
	d.nodes["win22"].blobs[preloaded.Layers[0].Digest] = true
	app := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"example.com/winapp:1"}, Platforms: []string{win2022}, Base: base, Gzip: true, LayerBytes: 4 << 10})
	res, err := Load(context.Background(), d, Options{Archives: []string{writeArchive(t, app)}})
	if err != nil {
		t.Fatal(err)
	}
	if nl := res.Images[0].Nodes[1]; nl.Outcome != Loaded || nl.LayersSent != 1 || nl.LayersReused != 1 {
		t.Errorf("win22: %+v, want the app layer sent and the base reused", nl)
	}
	f := d.nodes["win22"]
	if got := f.received[len(f.received)-1]; len(got) != 1 || got[0] == preloaded.Layers[0].Digest {
		t.Errorf("win22 received %v, want the app's layer only", got)
	}
}
