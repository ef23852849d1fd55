package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster/internal/clusterdir"
	"github.com/hwk-dev/hwk/pkg/imagearchive"
	"github.com/hwk-dev/hwk/pkg/imagearchive/imagearchivetest"
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
	imports  int
	spooled  []string
}

func newFakeContainerd(name string, os config.OS) *fakeContainerd {
	return &fakeContainerd{name: name, os: os, targets: map[string]string{}, configs: map[string]string{},
		platform: map[string]string{}, files: map[string][]byte{}}
}

// script recovers the script from a node handle's argv.
func script(args []string) string {
	s, _ := node.ScriptOf(args)
	return s
}

var (
	psDst      = regexp.MustCompile(`\$dst = '([^']+)'`)
	psImportOf = regexp.MustCompile(`'images' 'import' .*'([^']+\.tar)'`)
)

func (f *fakeContainerd) Run(_ context.Context, cmd node.Cmd) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := script(cmd.Args)
	switch {
	case strings.Contains(s, "images ls"):
		f.inventory(cmd.Stdout)
		return nil
	case strings.Contains(s, "OpenStandardInput"):
		data, err := io.ReadAll(cmd.Stdin)
		if err != nil {
			return err
		}
		dst := psDst.FindStringSubmatch(s)[1]
		f.files[dst] = data
		f.spooled = append(f.spooled, dst)
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
}

func (f *fakeContainerd) load(r io.Reader, stderr io.Writer) error {
	f.imports++
	a, err := imagearchive.Scan(r)
	if err != nil {
		fmt.Fprintf(stderr, "ctr: %v\n", err)
		return &node.ExitError{Code: 1}
	}
	for _, im := range a.Images {
		if len(im.Manifests) != 1 {
			fmt.Fprintf(stderr, "fake: hwk sent %d platforms of %s, want exactly the node's\n", len(im.Manifests), im.Name())
			return &node.ExitError{Code: 1}
		}
		for _, ref := range im.Refs {
			f.targets[ref], f.configs[ref], f.platform[ref] = im.Manifests[0].Digest, im.Manifests[0].Config, im.Manifests[0].Platform.String()
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

// loadDriver is memDriver under libvirt's name (which hosts both OSes)
// with machines that run a fake containerd.
type loadDriver struct {
	*memDriver
	nodes map[string]*fakeContainerd
}

func (d *loadDriver) Name() string           { return config.DriverLibvirt }
func (d *loadDriver) GuestOSes() []config.OS { return []config.OS{config.Linux, config.Windows} }
func (d *loadDriver) Node(_ context.Context, r drivers.Ref) (*node.Node, error) {
	f := d.nodes[r.Name]
	if f == nil {
		return nil, fmt.Errorf("no node %s", r.Name)
	}
	return node.New(r.Name, f.os, f), nil
}

// loadCluster makes the record of a cluster "lc" with the given nodes
// (name → "linux", "2022" or "2025") and fake containerds for them.
func loadCluster(t *testing.T, nodes ...string) (*Provider, *loadDriver) {
	t.Helper()
	d := &loadDriver{memDriver: newMem(), nodes: map[string]*fakeContainerd{}}
	p, _ := testProvider(t, d)
	cfg := &config.Cluster{Name: "lc"}
	for i := 0; i < len(nodes); i += 2 {
		n := config.Node{Name: nodes[i], OS: config.Linux, Role: config.Worker, Driver: config.DriverLibvirt}
		if i == 0 {
			n.Role = config.ControlPlane
		}
		if v := nodes[i+1]; v != "linux" {
			n.OS, n.WindowsVersion = config.Windows, v
		}
		cfg.Nodes = append(cfg.Nodes, n)
		d.nodes[n.Name] = newFakeContainerd(n.Name, n.OS)
		d.machines["lc/"+n.Name] = drivers.MachineSpec{Ref: drivers.Ref{Cluster: "lc", Name: n.Name}, OS: n.OS}
	}
	config.SetDefaults(cfg, config.Host{OS: "linux", Drivers: map[config.OS]string{config.Linux: config.DriverLibvirt, config.Windows: config.DriverLibvirt}})
	dir, err := p.store().Create("lc")
	if err != nil {
		t.Fatal(err)
	}
	if err := clusterdir.WriteRecord(dir, cfg); err != nil {
		t.Fatal(err)
	}
	return p, d
}

func writeArchive(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "images.tar")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func outcomes(res *LoadResult) string {
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
	p, d := loadCluster(t, "cp", "linux", "win22", "2022", "win25", "2025")
	archive := writeArchive(t, imagearchivetest.OCI(
		imagearchivetest.Image{Refs: []string{"example.com/linux-only:1"}, Platforms: []string{linuxAMD64}},
		imagearchivetest.Image{Refs: []string{"example.com/win:ltsc2022"}, Platforms: []string{win2022}},
		imagearchivetest.Image{Refs: []string{"example.com/multi:1"}, Platforms: []string{linuxAMD64, "linux/arm64", win2022, win2025}},
	))
	res, err := p.LoadImages(context.Background(), "lc", LoadOptions{Archives: []string{archive}})
	if err != nil {
		t.Fatalf("LoadImages: %v", err)
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
	res, err = p.LoadImages(context.Background(), "lc", LoadOptions{Archives: []string{archive}})
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
	p, d := loadCluster(t, "cp", "linux", "win22", "2022")
	archive := writeArchive(t, imagearchivetest.OCI(
		imagearchivetest.Image{Refs: []string{"example.com/ok:1"}, Platforms: []string{linuxAMD64}},
		imagearchivetest.Image{Refs: []string{"example.com/new:ltsc2025"}, Platforms: []string{win2025}},
	))
	_, err := p.LoadImages(context.Background(), "lc", LoadOptions{Archives: []string{archive}})
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
	res, err := p.LoadImages(context.Background(), "lc", LoadOptions{Archives: []string{archive}, Nodes: []string{"win22"}})
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
	p, d := loadCluster(t, "cp", "linux", "w1", "linux")
	good := imagearchivetest.OCI(
		imagearchivetest.Image{Refs: []string{"example.com/a:1"}, Platforms: []string{linuxAMD64}, LayerBytes: 64 << 10},
		imagearchivetest.Image{Refs: []string{"example.com/b:1"}, Platforms: []string{linuxAMD64}, LayerBytes: 64 << 10},
	)
	for name, data := range map[string][]byte{
		"flipped byte": imagearchivetest.Corrupt(good, []byte("1-linux/amd641-linux")),
		"cut short":    good[:len(good)*2/3],
	} {
		t.Run(name, func(t *testing.T) {
			_, err := p.LoadImages(context.Background(), "lc", LoadOptions{Archives: []string{writeArchive(t, data)}})
			if err == nil || !strings.Contains(err.Error(), "nothing was loaded") {
				t.Fatalf("LoadImages = %v, want a corrupt-archive error", err)
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
	p, d := loadCluster(t, "cp", "linux")
	first := imagearchivetest.Docker(imagearchivetest.Image{Refs: []string{"my/app:dev"}, Platforms: []string{linuxAMD64}})
	if _, err := p.LoadImages(context.Background(), "lc", LoadOptions{Archives: []string{writeArchive(t, first)}}); err != nil {
		t.Fatal(err)
	}
	// The same image under a second name.
	second := imagearchivetest.Docker(imagearchivetest.Image{Refs: []string{"my/app:dev", "my/app:v2"}, Platforms: []string{linuxAMD64}})
	res, err := p.LoadImages(context.Background(), "lc", LoadOptions{Archives: []string{writeArchive(t, second)}})
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

func TestLoadNamesUnknownNodes(t *testing.T) {
	p, _ := loadCluster(t, "cp", "linux")
	archive := writeArchive(t, imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"a:1"}, Platforms: []string{linuxAMD64}}))
	_, err := p.LoadImages(context.Background(), "lc", LoadOptions{Archives: []string{archive}, Nodes: []string{"nope"}})
	if err == nil || !strings.Contains(err.Error(), `cluster lc has no node "nope"; its nodes are cp`) {
		t.Errorf("err = %v", err)
	}
	_, err = p.LoadImages(context.Background(), "other", LoadOptions{Archives: []string{archive}})
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Errorf("unknown cluster: %v", err)
	}
}
