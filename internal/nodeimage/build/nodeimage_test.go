package build

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/node-images/linux"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

func testBuilder(t *testing.T, source nodeimage.Source) *builder {
	t.Helper()
	r, err := loadRecipe()
	if err != nil {
		t.Fatal(err)
	}
	opts := nodeimage.Options{KubernetesVersion: "v1.35.4", Source: source, Formats: []nodeimage.Format{nodeimage.FormatTar}, CacheDir: t.TempDir()}
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	b := &builder{opts: opts, recipe: r, bins: map[string]string{}, goVer: "go1.26.8"}
	if err := b.computeKeys(); err != nil {
		t.Fatal(err)
	}
	return b
}

// linuxHostBuilder returns testBuilder's build as a linux/amd64 host makes it,
// on whatever host runs the test: one that builds every component from
// source (runc's cgo too) and runs the node's kubeadm.
func linuxHostBuilder(t *testing.T, source nodeimage.Source) *builder {
	t.Helper()
	b := testBuilder(t, source)
	yes := true
	b.hostRunsNode = &yes
	if err := b.computeKeys(); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRecipeLoads(t *testing.T) {
	r, err := loadRecipe()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kubernetes", "containerd", "runc", "cni-plugins", "crictl", "etcd", "coredns", "pause", "calico"} {
		if r.component(name) == nil {
			t.Errorf("recipe has no component %s", name)
		}
	}
	// Every component installed on the node can come from both sources.
	for _, c := range r.Components {
		if len(c.Install) > 0 && len(c.Release) == 0 {
			t.Errorf("component %s is installed on the node but has no release artifacts", c.Name)
		}
		if c.Source.Module == "" && c.Source.Main == "" {
			t.Errorf("component %s has no source build", c.Name)
		}
	}
	if len(r.Images) != 10 {
		t.Errorf("recipe preloads %d images, want 10 (7 from kubeadm, 3 Calico)", len(r.Images))
	}
}

func TestRecipeCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(r *recipe)
		error string
	}{
		{"unknown component", func(r *recipe) { r.Images[0].Component = "nope" }, `names unknown component "nope"`},
		{"unbuilt binary", func(r *recipe) { r.Images[0].Files[0].From = "kubernetes/kube-nothing" }, "takes kubernetes/kube-nothing, which no component builds"},
		{"bad base", func(r *recipe) { r.Images[0].Base = "alpine" }, `base "alpine" is not scratch or userland`},
		{"file of no image", func(r *recipe) { r.FromImages[0].Image = "quay.io/calico/nope" }, "fromImages names quay.io/calico/nope, which is not one of the images"},
		{"file outside the root", func(r *recipe) { r.FromImages[0].Files[0] = "../etc/passwd" }, `"../etc/passwd" is not a clean relative path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := loadRecipe()
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(r)
			err = r.check()
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Fatalf("check() = %v, want error containing %q", err, tc.error)
			}
		})
	}
}

func TestKeysFollowInputs(t *testing.T) {
	a := linuxHostBuilder(t, nodeimage.FromSource)
	b := linuxHostBuilder(t, nodeimage.FromSource)
	if a.keys["node"] != b.keys["node"] {
		t.Fatal("same inputs gave different keys")
	}
	c := linuxHostBuilder(t, nodeimage.Release)
	if c.keys["node"] == a.keys["node"] || c.keys["component/containerd"] == a.keys["component/containerd"] {
		t.Error("source and release builds share a key")
	}
	d := linuxHostBuilder(t, nodeimage.FromSource)
	d.goVer = "go1.27.0"
	if err := d.computeKeys(); err != nil {
		t.Fatal(err)
	}
	if d.keys["component/runc"] == a.keys["component/runc"] || d.keys["node"] == a.keys["node"] {
		t.Error("a new Go version did not change the source build's keys")
	}
	if !strings.HasPrefix(a.name(), "linux-v1.35.4-source-") {
		t.Errorf("name %q", a.name())
	}
}

func TestUnknownKubernetesWrapper(t *testing.T) {
	r, err := loadRecipe()
	if err != nil {
		t.Fatal(err)
	}
	opts := nodeimage.Options{KubernetesVersion: "v1.35.99", Source: nodeimage.FromSource, Formats: []nodeimage.Format{nodeimage.FormatTar}, CacheDir: t.TempDir()}
	b := &builder{opts: opts, recipe: r, goVer: "go1.26.8"}
	err = b.computeKeys()
	if err == nil || !strings.Contains(err.Error(), "no wrapper module kubernetes-v1.35.99") || !strings.Contains(err.Error(), "v1.35.4") {
		t.Fatalf("computeKeys = %v, want an error naming the versions that have wrappers", err)
	}
}

// fakeKubeadm returns a script that prints an image list the way kubeadm does:
// a shell script, or on Windows a batch file (CreateProcess runs a .cmd
// through cmd.exe), which echoes image references as they are.
func fakeKubeadm(t *testing.T, images ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeadm")
	script := "#!/bin/sh\ncat <<'EOF'\n" + strings.Join(images, "\n") + "\nEOF\n"
	if runtime.GOOS == "windows" {
		p += ".cmd"
		script = "@echo off\r\n"
		for _, img := range images {
			script += "echo " + img + "\r\n"
		}
	}
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

var kubeadmList = []string{
	"registry.k8s.io/kube-apiserver:v1.35.4",
	"registry.k8s.io/kube-controller-manager:v1.35.4",
	"registry.k8s.io/kube-scheduler:v1.35.4",
	"registry.k8s.io/kube-proxy:v1.35.4",
	"registry.k8s.io/coredns/coredns:v1.13.1",
	"registry.k8s.io/pause:3.10.1",
	"registry.k8s.io/etcd:3.6.6-0",
}

func TestImageRefs(t *testing.T) {
	b := linuxHostBuilder(t, nodeimage.FromSource)
	b.bins["kubernetes/kubeadm"] = fakeKubeadm(t, kubeadmList...)
	refs, err := b.imageRefs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]string{}, kubeadmList[:4]...), "registry.k8s.io/etcd:3.6.6-0", "registry.k8s.io/coredns/coredns:v1.13.1", "registry.k8s.io/pause:3.10.1",
		"quay.io/calico/cni:v3.31.0", "quay.io/calico/node:v3.31.0", "quay.io/calico/kube-controllers:v3.31.0")
	if strings.Join(refs, " ") != strings.Join(want, " ") {
		t.Errorf("refs\n got %v\nwant %v", refs, want)
	}

	// A host that cannot run the node's kubeadm (Windows, macOS) takes
	// the same refs from the recipe alone; stage2.sh checks them.
	no, yes := false, true
	b.hostRunsNode = &no
	b.bins["kubernetes/kubeadm"] = filepath.Join(t.TempDir(), "no-kubeadm")
	if other, err := b.imageRefs(context.Background()); err != nil || strings.Join(other, " ") != strings.Join(refs, " ") {
		t.Errorf("refs on a host that cannot run kubeadm: %v, %v\nwant %v", other, err, refs)
	}
	b.hostRunsNode = &yes

	for _, tc := range []struct {
		name  string
		list  []string
		error string
	}{
		{"newer etcd", replace(kubeadmList, "registry.k8s.io/etcd:3.6.6-0", "registry.k8s.io/etcd:3.6.7-0"), "wants registry.k8s.io/etcd:3.6.7-0, but the recipe pins etcd v3.6.6"},
		{"extra image", append(append([]string{}, kubeadmList...), "registry.k8s.io/kube-dns:1.0"), "uses registry.k8s.io/kube-dns:1.0, which images/linux.yaml does not preload"},
		{"missing image", kubeadmList[1:], "preloads registry.k8s.io/kube-apiserver, but kubeadm v1.35.4 does not use it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.bins["kubernetes/kubeadm"] = fakeKubeadm(t, tc.list...)
			_, err := b.imageRefs(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Fatalf("imageRefs = %v, want %q", err, tc.error)
			}
		})
	}
}

func replace(list []string, old, new string) []string {
	out := append([]string{}, list...)
	for i := range out {
		if out[i] == old {
			out[i] = new
		}
	}
	return out
}

// releaseServer serves fake release artifacts and their checksum files.
type releaseServer struct {
	*httptest.Server
	files map[string][]byte
	hits  map[string]int
}

func newReleaseServer(t *testing.T) *releaseServer {
	s := &releaseServer{files: map[string][]byte{}, hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits[r.URL.Path]++
		data, ok := s.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	}))
	t.Cleanup(s.Close)
	return s
}

func sha256Hex(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

func tgz(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for n, c := range files {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(c)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(c))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// TestDownloadComponents fetches each kind of release layout the recipe
// uses (one file per binary, a tarball, a renamed binary listed in a
// multi-entry checksum file) with the recipe's own URL templates pointed
// at a local server.
func TestDownloadComponents(t *testing.T) {
	srv := newReleaseServer(t)
	b := testBuilder(t, nodeimage.Release)
	b.opts.HTTP = srv.Client()
	local := func(u string) string {
		p, err := url.Parse(strings.ReplaceAll(strings.ReplaceAll(u, "{{.", "%7B%7B."), "}}", "%7D%7D"))
		if err != nil {
			t.Fatal(err)
		}
		p.Scheme, p.Host = "http", strings.TrimPrefix(srv.URL, "http://")
		s, _ := url.PathUnescape(p.String())
		return s
	}
	for i := range b.recipe.Components {
		c := &b.recipe.Components[i]
		for j := range c.Release {
			c.Release[j].URL = local(c.Release[j].URL)
			if strings.HasPrefix(c.Release[j].Sums, "http") {
				c.Release[j].Sums = local(c.Release[j].Sums)
			}
		}
	}
	// kubeadm, kubelet, kubectl: one file each with a bare .sha256.
	for _, n := range []string{"kubeadm", "kubelet", "kubectl"} {
		p := "/release/v1.35.4/bin/linux/amd64/" + n
		srv.files[p] = []byte("#!/bin/sh\necho " + n)
		srv.files[p+".sha256"] = []byte(sha256Hex(srv.files[p]))
	}
	// containerd: a tarball with bin/ members and a "hex  name" file.
	ctd := tgz(t, map[string]string{"bin/containerd": "c", "bin/containerd-shim-runc-v2": "s", "bin/ctr": "ctr"})
	srv.files["/containerd/containerd/releases/download/v2.3.1/containerd-2.3.1-linux-amd64.tar.gz"] = ctd
	srv.files["/containerd/containerd/releases/download/v2.3.1/containerd-2.3.1-linux-amd64.tar.gz.sha256sum"] =
		[]byte(sha256Hex(ctd) + "  containerd-2.3.1-linux-amd64.tar.gz\n")
	// runc: runc.amd64 listed among others in runc.sha256sum.
	runc := []byte("runc-binary")
	srv.files["/opencontainers/runc/releases/download/v1.4.2/runc.amd64"] = runc
	srv.files["/opencontainers/runc/releases/download/v1.4.2/runc.sha256sum"] = []byte(
		sha256Hex([]byte("x")) + "  runc.arm64\n" + sha256Hex(runc) + " *runc.amd64\n")

	ctx := context.Background()
	for _, name := range []string{"kubernetes", "containerd", "runc"} {
		c := b.recipe.component(name)
		dir := t.TempDir()
		if err := b.downloadComponent(ctx, c, b.needed(c), dir); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, bin := range b.needed(c) {
			if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	if srv.hits["/release/v1.35.4/bin/linux/amd64/kube-apiserver"] != 0 {
		t.Error("a release build downloaded kube-apiserver, which only its image needs")
	}

	// A tampered artifact fails and names what was wrong.
	srv.files["/opencontainers/runc/releases/download/v1.4.2/runc.amd64"] = []byte("tampered")
	b.opts.CacheDir = t.TempDir()
	err := b.downloadComponent(ctx, b.recipe.component("runc"), []string{"runc"}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "mismatch") {
		t.Fatalf("tampered runc: %v, want a checksum mismatch", err)
	}
}

// TestPullImage pulls from a real (in-process) registry and checks the
// archive holds the very image that was pushed.
func TestPullImage(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/calico/node:v3.31.0"
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	b := testBuilder(t, nodeimage.Release)
	file := filepath.Join(t.TempDir(), "node.tar")
	if err := b.pullImage(context.Background(), ref, file); err != nil {
		t.Fatal(err)
	}
	got, err := archiveInfo(file, ref)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if got.Digest != want.String() {
		t.Errorf("pulled digest %s, pushed %s", got.Digest, want)
	}
	if err := b.pullImage(context.Background(), host+"/calico/node:v9", filepath.Join(t.TempDir(), "x.tar")); err == nil {
		t.Error("pulling a missing tag succeeded")
	}
}

// TestPackImage makes a scratch image from "binaries" and checks its
// files, modes, owners and config.
func TestPackImage(t *testing.T) {
	b := testBuilder(t, nodeimage.FromSource)
	spec := fakeCalico(t, b, "quay.io/calico/kube-controllers", "kube-controllers", "check-status", "wrapper")
	file := filepath.Join(t.TempDir(), "kc.tar")
	ref := "quay.io/calico/kube-controllers:v3.31.0"
	if err := b.packImage(context.Background(), spec, ref, file); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(ref)
	img, err := tarball.ImageFromPath(file, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := img.ConfigFile()
	if cfg.Config.User != "999" || strings.Join(cfg.Config.Entrypoint, " ") != "/usr/bin/wrapper /usr/bin/kube-controllers" || cfg.OS != "linux" {
		t.Errorf("config %+v", cfg.Config)
	}
	layers, _ := img.Layers()
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1 (scratch base)", len(layers))
	}
	rc, _ := layers[0].Uncompressed()
	defer rc.Close()
	seen := tarEntries(t, rc, func(h *tar.Header, data []byte) string {
		return fmt.Sprintf("%o %d %s", h.Mode, h.Uid, data)
	})
	for p, want := range map[string]string{
		"usr/bin/check-status": "755 0 bin:check-status",
		"usr/bin/wrapper":      "755 0 bin:wrapper",
		"status/status.json":   "644 999 ",
		"profiles/cpu.pprof":   "644 999 ",
	} {
		if seen[p] != want {
			t.Errorf("%s: %q, want %q", p, seen[p], want)
		}
	}
	// Same inputs, same image: what a cache key promises.
	file2 := filepath.Join(t.TempDir(), "kc.tar")
	if err := b.packImage(context.Background(), spec, ref, file2); err != nil {
		t.Fatal(err)
	}
	a, _ := archiveInfo(file, ref)
	c, _ := archiveInfo(file2, ref)
	if a.Digest != c.Digest {
		t.Errorf("packing twice gave %s and %s", a.Digest, c.Digest)
	}
}

// TestPackStoresABinaryOnce checks that the layer holds calico-ipam, the
// calico binary under a second name, once, and links the other path.
func TestPackStoresABinaryOnce(t *testing.T) {
	b := testBuilder(t, nodeimage.FromSource)
	spec := fakeCalico(t, b, "quay.io/calico/cni", "calico", "install")
	data, err := b.layerFiles(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	got := tarEntries(t, bytes.NewReader(data), func(h *tar.Header, _ []byte) string {
		return fmt.Sprintf("%c %s %d", h.Typeflag, h.Linkname, h.Size)
	})
	if got["opt/cni/bin/calico"] != "0  10" || got["opt/cni/bin/calico-ipam"] != "1 opt/cni/bin/calico 0" {
		t.Errorf("layer entries %v", got)
	}
}

// fakeCalico gives b stand-in calico binaries (their content is their
// name) and returns the recipe's spec for image name.
func fakeCalico(t *testing.T, b *builder, name string, bins ...string) *imageSpec {
	t.Helper()
	dir := t.TempDir()
	for _, bin := range bins {
		p := filepath.Join(dir, bin)
		if err := os.WriteFile(p, []byte("bin:"+bin), 0o755); err != nil {
			t.Fatal(err)
		}
		b.bins["calico/"+bin] = p
	}
	for i := range b.recipe.Images {
		if b.recipe.Images[i].Name == name {
			return &b.recipe.Images[i]
		}
	}
	t.Fatalf("the recipe has no image %s", name)
	return nil
}

// tarEntries describes each entry of a tar stream with describe.
func tarEntries(t *testing.T, r io.Reader, describe func(*tar.Header, []byte) string) map[string]string {
	t.Helper()
	tr := tar.NewReader(r)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = describe(h, data)
	}
}

// TestPackKeepsMergedUsr checks that, /bin being a symlink to usr/bin on
// the Debian base, a file packed for bin/ lands in usr/bin, and the layer
// never declares bin a directory (which would hide /bin/sh).
func TestPackKeepsMergedUsr(t *testing.T) {
	b := testBuilder(t, nodeimage.FromSource)
	node := fakeCalico(t, b, "quay.io/calico/node", "calico-node")
	spec := &imageSpec{Name: node.Name, Base: "userland", Files: []imageFile{{From: "calico/calico-node", To: "bin/calico-node"}}}
	data, err := b.layerFiles(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	got := tarEntries(t, bytes.NewReader(data), func(h *tar.Header, _ []byte) string { return string(h.Typeflag) })
	if _, ok := got["bin/"]; ok {
		t.Errorf("layer declares bin/: %v", got)
	}
	if got["usr/bin/calico-node"] != string(rune(tar.TypeReg)) {
		t.Errorf("layer entries %v, want usr/bin/calico-node", got)
	}
}

// TestWindowsManifestIsPrivate checks that a Windows image's manifest,
// which holds its Administrator password, is written 0600, and that a
// Linux one stays 0644.
func TestWindowsManifestIsPrivate(t *testing.T) {
	for _, c := range []struct {
		m    *nodeimage.Manifest
		mode os.FileMode
	}{
		{&nodeimage.Manifest{Name: "l", OS: "linux"}, 0o644},
		{&nodeimage.Manifest{Name: "w", OS: "windows", Windows: &nodeimage.Windows{Version: "2022", AdminPassword: "Secret-Passw0rd#1"}}, 0o600},
	} {
		c.m.Dir = t.TempDir()
		if err := c.m.Write(); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(filepath.Join(c.m.Dir, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		// Windows has no mode bits: os.Chmod and os.WriteFile use only
		// the owner-writable bit there (the read-only attribute), and
		// os.Stat reports 0666 for any writable file. What keeps others
		// out there is the ACL the cache inherits from the user's profile
		// (%LOCALAPPDATA%).
		if runtime.GOOS != "windows" && st.Mode().Perm() != c.mode {
			t.Errorf("%s manifest is %v, want %v", c.m.OS, st.Mode().Perm(), c.mode)
		}
		back, err := nodeimage.ReadManifest(c.m.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if c.m.Windows != nil && (back.Windows.AdminPassword != "Secret-Passw0rd#1" || back.Public().Windows.AdminPassword != "" || back.Windows.AdminPassword == "") {
			t.Error("the password is not kept, or Public does not drop it (or changed the original)")
		}
	}
}

// TestPauseFromSource builds the pause component as a source build does
// (Go, for linux/amd64, so on any host) and runs it: -v names the pinned
// version; started, it warns it is not PID 1 and leaves with 0 on SIGTERM.
func TestPauseFromSource(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Go toolchain")
	}
	b := testBuilder(t, nodeimage.FromSource)
	b.opts.Log = io.Discard
	c := b.recipe.component("pause")
	dir := t.TempDir()
	if err := b.buildComponent(context.Background(), c, dir); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "pause")
	// A static linux/amd64 executable, whichever host built it.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("pause is not an ELF file: %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("pause names a dynamic loader: it is not static")
		}
	}
	if f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC {
		t.Errorf("pause is %v %v, want an x86-64 executable", f.Machine, f.Type)
	}
	f.Close()
	if runtime.GOOS != "linux" {
		t.Skip("the rest runs pause, a Linux program; this host built it and cannot run it")
	}
	out, err := exec.Command(bin, "-v").Output()
	if err != nil || string(out) != "pause (hwk) "+c.Version+"\n" {
		t.Fatalf("pause -v: %q, %v", out, err)
	}
	if data, err := os.ReadFile(bin); err != nil || bytes.Contains(data, []byte("/lib64/ld-linux")) {
		t.Errorf("pause is not static (%v)", err)
	}
	cmd := exec.Command(bin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("pause after SIGTERM: %v", err)
	}
	if !strings.Contains(stderr.String(), "not PID 1") {
		t.Errorf("stderr = %q, want the not-PID-1 warning", stderr.String())
	}
}

// TestSourceOfCGO checks that a source build on a host that cannot build
// Linux cgo (Windows, macOS) takes runc, and only runc, from its release,
// and that on linux/amd64 everything is built.
func TestSourceOfCGO(t *testing.T) {
	b := linuxHostBuilder(t, nodeimage.FromSource)
	for i := range b.recipe.Components {
		if c := &b.recipe.Components[i]; b.sourceOf(c) != nodeimage.FromSource {
			t.Errorf("on linux/amd64 %s comes from %s", c.Name, b.sourceOf(c))
		}
	}
	built := b.keys["component/runc"]
	no := false
	b.hostRunsNode = &no
	for i := range b.recipe.Components {
		c := &b.recipe.Components[i]
		want := nodeimage.FromSource
		if c.Name == "runc" {
			want = nodeimage.Release
		}
		if got := b.sourceOf(c); got != want {
			t.Errorf("elsewhere %s comes from %s, want %s", c.Name, got, want)
		}
	}
	if _, err := b.componentKeys(); err != nil {
		t.Fatal(err)
	}
	if b.keys["component/runc"] == built {
		t.Error("runc's release has the key of its source build")
	}
	if got := b.needed(b.recipe.component("runc")); strings.Join(got, " ") != "runc" {
		t.Errorf("runc's release gives %v", got)
	}
}

// TestLinuxRecipesHaveNoCR checks that no file hwk embeds to run in Linux
// holds a carriage return (a Windows checkout without .gitattributes'
// eol=lf would give every one of them CRLF, and dash fails on the first
// line).
func TestLinuxRecipesHaveNoCR(t *testing.T) {
	for name, fsys := range map[string]fs.FS{"node-images/linux": linux.Recipe, "images": images.Recipe} {
		err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := fs.ReadFile(fsys, p)
			if err == nil && bytes.Contains(data, []byte("\r")) {
				t.Errorf("%s/%s holds a carriage return", name, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(vmInit, "\r") {
		t.Error("vminit.sh holds a carriage return")
	}
}
