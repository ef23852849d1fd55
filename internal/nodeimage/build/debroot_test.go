package build

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/internal/debian"
	"github.com/hwk-dev/hwk/internal/drivers/wsl2"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/testing/enginefile"
	"github.com/hwk-dev/hwk/internal/testing/wsltest"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

type tarEntry struct {
	name, link string
	typ        byte
	data       string
}

func writeTestTar(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o755, Size: int64(len(e.data))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readTestTar(t *testing.T, r io.Reader) (names []string, files map[string]string) {
	t.Helper()
	files = map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, files
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = string(data)
		}
		if h.Typeflag == tar.TypeLink {
			files[h.Name] = "->" + h.Linkname
		}
	}
}

// readTestLinks maps a tar's symlinks to their targets.
func readTestLinks(t *testing.T, data []byte) map[string]string {
	t.Helper()
	links := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return links
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeSymlink {
			links[h.Name] = h.Linkname
		}
	}
}

// TestCleanExport checks that the root keeps none of Docker's own files,
// which a container's export holds.
func TestCleanExport(t *testing.T) {
	in := writeTestTar(t, []tarEntry{
		{name: ".dockerenv", typ: tar.TypeReg},
		{name: "bin", typ: tar.TypeSymlink, link: "usr/bin"},
		{name: "dev/", typ: tar.TypeDir},
		{name: "dev/console", typ: tar.TypeReg},
		{name: "dev/pts/", typ: tar.TypeDir},
		{name: "etc/", typ: tar.TypeDir},
		{name: "etc/hostname", typ: tar.TypeReg},
		{name: "etc/hosts", typ: tar.TypeReg, data: "172.17.0.2 3f2a\n"},
		{name: "etc/mtab", typ: tar.TypeSymlink, link: "/proc/mounts"},
		{name: "etc/hostname.d", typ: tar.TypeReg, data: "kept"},
		{name: "hwk/", typ: tar.TypeDir},
		{name: "hwk/stage2.sh", typ: tar.TypeReg, data: "x"},
		{name: "hwkx", typ: tar.TypeReg, data: "kept"},
		{name: "proc/", typ: tar.TypeDir},
		{name: "proc/1/", typ: tar.TypeDir},
		{name: "sys/", typ: tar.TypeDir},
		{name: "sys/fs/", typ: tar.TypeDir},
		{name: "usr/bin/sh", typ: tar.TypeReg, data: "sh"},
	})
	var out bytes.Buffer
	if err := cleanExport(bytes.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	names, files := readTestTar(t, bytes.NewReader(out.Bytes()))
	// etc/resolv.conf, which this kernel did not make, is added, and
	// etc/mtab is systemd's link whatever the kernel made.
	want := []string{"bin", "dev/", "etc/", "etc/hostname", "etc/hosts", "etc/hostname.d", "hwkx", "proc/", "sys/", "usr/bin/sh", "etc/resolv.conf", "etc/mtab"}
	if !slices.Equal(names, want) {
		t.Errorf("entries\n  %v\nwant\n  %v", names, want)
	}
	if got := readTestLinks(t, out.Bytes())["etc/mtab"]; got != "../proc/self/mounts" {
		t.Errorf("etc/mtab -> %q", got)
	}
	if files["etc/hostname"] != "node\n" || !strings.HasPrefix(files["etc/hosts"], "127.0.0.1\tlocalhost\n") || files["etc/resolv.conf"] != "" {
		t.Errorf("runtime files: hostname %q, hosts %q, resolv.conf %q", files["etc/hostname"], files["etc/hosts"], files["etc/resolv.conf"])
	}
	if _, ok := files["etc/resolv.conf"]; !ok {
		t.Error("etc/resolv.conf is not a regular file")
	}
	if files["etc/hostname.d"] != "kept" || files["hwkx"] != "kept" {
		t.Errorf("names that only start like a dropped one were changed: %v", files)
	}
}

func TestWriteStage2Tar(t *testing.T) {
	stage1 := filepath.Join(t.TempDir(), "stage1.tar")
	if err := os.WriteFile(stage1, writeTestTar(t, []tarEntry{
		{name: "./", typ: tar.TypeDir},
		{name: "./usr/bin/sh", typ: tar.TypeReg, data: "sh"},
	}), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := writeStage2Tar(&out, stage1, stage2{script: []byte("echo hi\n"), add: func(tw *tar.Writer) error {
		return tarFile(tw, "hwk/x", []byte("x"), 0o644)
	}}, map[string]string{"etc/wsl.conf": "[boot]\n"})
	if err != nil {
		t.Fatal(err)
	}
	names, files := readTestTar(t, &out)
	if want := []string{"./", "./usr/bin/sh", "etc/wsl.conf", "hwk/", "hwk/stage2.sh", "hwk/x"}; !slices.Equal(names, want) {
		t.Errorf("entries %v, want %v", names, want)
	}
	if files["hwk/stage2.sh"] != "echo hi\n" || files["./usr/bin/sh"] != "sh" {
		t.Errorf("files %v", files)
	}

	err = writeStage2Tar(io.Discard, stage1, stage2{add: func(*tar.Writer) error { return errors.New("boom") }}, nil)
	if err == nil || err.Error() != "boom" {
		t.Errorf("a failing add: %v", err)
	}
}

func TestWithoutKernel(t *testing.T) {
	b := testBuilder(t, nodeimage.Release)
	file := filepath.Join(t.TempDir(), "rootfs.tar")
	if err := os.WriteFile(file, writeTestTar(t, []tarEntry{
		{name: "boot/", typ: tar.TypeDir},
		{name: "boot/vmlinuz-6.1.0-40-cloud-amd64", typ: tar.TypeReg, data: "k"},
		{name: "bootstrap", typ: tar.TypeReg, data: "kept"},
		{name: "usr/lib/modules/", typ: tar.TypeDir},
		{name: "usr/lib/modules/6.1.0-40-cloud-amd64/", typ: tar.TypeDir},
		{name: "./usr/lib/modules/6.1.0-40-cloud-amd64/modules.dep", typ: tar.TypeReg},
		{name: "usr/lib/os-release", typ: tar.TypeReg, data: "x"},
	}), 0o644); err != nil {
		t.Fatal(err)
	}
	var names []string
	err := b.withoutKernel(file, func(r io.Reader) error {
		names, _ = readTestTar(t, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"boot/", "bootstrap", "usr/lib/modules/", "usr/lib/os-release"}; !slices.Equal(names, want) {
		t.Errorf("entries %v, want %v", names, want)
	}
	// A reader that stops early is an error for the caller, not a hang.
	err = b.withoutKernel(file, func(io.Reader) error { return errors.New("stop") })
	if err == nil || err.Error() != "stop" {
		t.Errorf("early stop: %v", err)
	}
}

func TestTarDirs(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	d := tarDirs{tw: tw, seen: map[string]bool{}}
	for _, n := range []string{"hwk/root/etc/a", "hwk/root/etc/b/c", "hwk/root/usr/local/bin/x", "hwk/preload/x"} {
		if err := d.parents(n); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	names, _ := readTestTar(t, &buf)
	want := []string{"hwk/", "hwk/root/", "hwk/root/etc/", "hwk/root/etc/b/", "hwk/root/usr/", "hwk/root/usr/local/", "hwk/root/usr/local/bin/", "hwk/preload/"}
	if !slices.Equal(names, want) {
		t.Errorf("dirs %v, want %v", names, want)
	}
}

func TestJSONStreamError(t *testing.T) {
	if err := jsonStreamError(strings.NewReader(`{"status":"sha256:abc"}` + "\n")); err != nil {
		t.Errorf("a good stream: %v", err)
	}
	err := jsonStreamError(strings.NewReader(`{"status":"x"}{"errorDetail":{"message":"no space left on device"},"error":"no space"}`))
	if err == nil || err.Error() != "no space left on device" {
		t.Errorf("a failed stream: %v", err)
	}
}

// TestDockerKernel checks DockerKernel against the real engine, with a
// busybox root: the script runs offline as root, its failure names the
// exit code and the output, the export is cleaned, and nothing is left in
// the engine.
func TestDockerKernel(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Docker engine")
	}
	c, err := client.New(client.FromEnv)
	if err == nil {
		_, err = c.Ping(context.Background(), client.PingOptions{})
	}
	var bb []byte
	berr := errors.New("no Docker engine to read it through")
	if err == nil {
		bb, berr = staticBusybox(t, c)
	}
	if err != nil || berr != nil {
		if os.Getenv("HWK_REQUIRE_DOCKER") == "1" {
			t.Fatalf("needs a Docker engine (%v) and a static busybox (%v)", err, berr)
		}
		t.Skip("needs a Docker engine and a static busybox (Debian: busybox-static)")
	}
	dir := t.TempDir()
	stage1 := filepath.Join(dir, "stage1.tar")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./etc/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./tmp/", Typeflag: tar.TypeDir, Mode: 0o1777},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tarFile(tw, "./bin/busybox", bb, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"sh", "cat", "rm", "wget", "echo", "id"} {
		if err := tw.WriteHeader(&tar.Header{Name: "./bin/" + l, Typeflag: tar.TypeSymlink, Linkname: "busybox"}); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	if err := os.WriteFile(stage1, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	b := &builder{opts: nodeimage.Options{CacheDir: dir, Log: &log, Docker: func() (client.APIClient, error) { return c, nil }}}
	ctx := context.Background()

	script := `set -eu
id -u >/made-by-stage2
cat /hwk/input >>/made-by-stage2
echo stage2-ran
if wget -q -T 2 -O /dev/null http://deb.debian.org/ 2>/dev/null; then echo online >>/made-by-stage2; fi
echo not-the-hostname >/etc/hostname
rm -rf /hwk
`
	out := filepath.Join(dir, "out", "root.tar")
	k := b.kernel()
	err = b.configure(ctx, k, "test", stage1, stage2{script: []byte(script), add: func(tw *tar.Writer) error {
		return tarFile(tw, "hwk/input", []byte("input\n"), 0o644)
	}}, out)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "stage2-ran") {
		t.Errorf("the script's output is not in the log:\n%s", log.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	names, files := readTestTar(t, f)
	f.Close()
	if got := files["made-by-stage2"]; got != "0\ninput\n" {
		t.Errorf("/made-by-stage2 = %q, want uid 0 and the added file, offline", got)
	}
	if files["etc/hostname"] != "node\n" {
		t.Errorf("etc/hostname = %q", files["etc/hostname"])
	}
	for _, n := range names {
		if n == ".dockerenv" || strings.HasPrefix(n, "hwk/") {
			t.Errorf("the export holds %s", n)
		}
	}
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 1 {
		t.Errorf("beside the root: %v", ents)
	}

	// A failing script: its code and output in the error, no file.
	failed := filepath.Join(dir, "failed.tar")
	err = b.configure(ctx, k, "test", stage1, stage2{script: []byte("echo dpkg-said-this >&2\nexit 3\n")}, failed)
	if err == nil || !strings.Contains(err.Error(), "exited with 3") || !strings.Contains(err.Error(), "dpkg-said-this") {
		t.Errorf("a failing stage 2: %v", err)
	}
	if _, serr := os.Stat(failed); serr == nil {
		t.Error("a failed stage 2 left its root")
	}
	left, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "dev.hwk.build=test")})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) > 0 {
		t.Errorf("%d configure containers left", len(left.Items))
	}
	imgs, err := c.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("reference", "hwk-build/test")})
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs.Items) > 0 {
		t.Errorf("%d build images left", len(imgs.Items))
	}
}

// isStatic reports whether an ELF file needs no interpreter.
func isStatic(p string) bool {
	data, err := os.ReadFile(p)
	return err == nil && !bytes.Contains(data, []byte("/lib64/ld-linux"))
}

// staticBusybox returns a static Linux busybox: the first on PATH, here. A
// Windows host has no Linux programs, so there it is /bin/busybox of the
// engine's machine, read through the engine (enginefile).
func staticBusybox(t *testing.T, c *client.Client) ([]byte, error) {
	t.Helper()
	if runtime.GOOS != "windows" {
		p, err := exec.LookPath("busybox")
		if err != nil {
			return nil, err
		}
		if !isStatic(p) {
			return nil, fmt.Errorf("%s is not static", p)
		}
		return os.ReadFile(p)
	}
	const path = "/bin/busybox"
	data, err := enginefile.Read(t, c, path)
	if err == nil && bytes.Contains(data, []byte("/lib64/ld-linux")) {
		err = fmt.Errorf("%s on the engine's machine is not static", path)
	}
	return data, err
}

// TestNodeStage2Tar checks the node's stage-2 tar: each path once (the
// engine refuses a tar that names one twice), hwk's files templated, every
// binary and image there.
func TestNodeStage2Tar(t *testing.T) {
	b := testBuilder(t, nodeimage.FromSource)
	dir := t.TempDir()
	for _, c := range b.recipe.Components {
		for bin := range c.Install {
			p := filepath.Join(dir, c.Name+"-"+bin)
			if err := os.WriteFile(p, []byte(c.Name+"/"+bin), 0o755); err != nil {
				t.Fatal(err)
			}
			b.bins[c.Name+"/"+bin] = p
		}
	}
	for i, ref := range []string{"registry.k8s.io/pause:3.10.1", "quay.io/calico/node:v3.31.0"} {
		p := filepath.Join(dir, fmt.Sprintf("image%d.tar", i))
		if err := os.WriteFile(p, []byte(ref), 0o644); err != nil {
			t.Fatal(err)
		}
		b.images = append(b.images, builtImage{Image: nodeimage.Image{Ref: ref}, Path: p})
	}
	// The CNI image as hwk packs it: the plugin, and calico-ipam a hard
	// link to it (components.yaml's fromImages takes both).
	cni := filepath.Join(dir, "cni.tar")
	writeTestImage(t, cni, "quay.io/calico/cni:v3.31.0", []tarEntry{
		{name: "opt/", typ: tar.TypeDir},
		{name: "opt/cni/", typ: tar.TypeDir},
		{name: "opt/cni/bin/", typ: tar.TypeDir},
		{name: "opt/cni/bin/calico", typ: tar.TypeReg, data: "calico plugin"},
		{name: "opt/cni/bin/calico-ipam", typ: tar.TypeLink, link: "opt/cni/bin/calico"},
		{name: "opt/cni/bin/install", typ: tar.TypeReg, data: "installer"},
	})
	b.images = append(b.images, builtImage{Image: nodeimage.Image{Ref: "quay.io/calico/cni:v3.31.0"}, Path: cni})
	s, err := b.nodeStage2()
	if err != nil {
		t.Fatal(err)
	}
	stage1 := filepath.Join(dir, "stage1.tar")
	if err := os.WriteFile(stage1, writeTestTar(t, []tarEntry{{name: "./usr/bin/sh", typ: tar.TypeReg}}), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := writeStage2Tar(&out, stage1, s, nil); err != nil {
		t.Fatal(err)
	}
	raw := slices.Clone(out.Bytes())
	names, files := readTestTar(t, &out)
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("%s is in the tar twice", n)
		}
		seen[n] = true
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		if strings.HasPrefix(h.Name, "hwk/root/opt/cni/bin/calico") && h.Mode != 0o755 {
			t.Errorf("%s has mode %o, want the image's 755 (a link's mode is its target's)", h.Name, h.Mode)
		}
	}
	for _, want := range []string{"hwk/stage2.sh", "hwk/configure.sh", "hwk/root/usr/local/bin/kubeadm", "hwk/root/usr/local/sbin/hwk-seed", "hwk/root/etc/systemd/system/kubelet.service", "hwk/preload/00.tar", "hwk/preload/01.tar"} {
		if _, ok := files[want]; !ok {
			t.Errorf("no %s in the tar", want)
		}
	}
	if got := files["hwk/kubeadm-images"]; got != "registry.k8s.io/pause:3.10.1\n" {
		t.Errorf("hwk/kubeadm-images = %q, want the one kubeadm-tagged image", got)
	}
	if got := files["hwk/kubeadm-images.yaml"]; !strings.Contains(got, "kubernetesVersion: "+b.opts.KubernetesVersion+"\n") || !strings.Contains(got, "name: node") {
		t.Errorf("hwk/kubeadm-images.yaml = %q", got)
	}
	if got := files["hwk/root/usr/local/bin/kubeadm"]; got != "kubernetes/kubeadm" {
		t.Errorf("kubeadm holds %q", got)
	}
	if !strings.Contains(files["hwk/root/etc/containerd/config.toml"], "registry.k8s.io/pause:3.10.1") {
		t.Error("containerd's config does not name the pause image")
	}
	if got := files["hwk/root/opt/cni/bin/calico"]; got != "calico plugin" {
		t.Errorf("the node's calico plugin holds %q, want the image's", got)
	}
	if got, ok := files["hwk/root/opt/cni/bin/calico-ipam"]; !ok || got != "->hwk/root/opt/cni/bin/calico" {
		t.Errorf("the node's calico-ipam is %q (present %v), want a hard link to its calico", got, ok)
	}
	if _, ok := files["hwk/root/opt/cni/bin/install"]; ok {
		t.Error("the node carries the CNI image's installer, which the recipe does not list")
	}
	if got, want := files["hwk/root/"+images.RootFilesRecord], "quay.io/calico/cni:v3.31.0 opt/cni/bin/calico\nquay.io/calico/cni:v3.31.0 opt/cni/bin/calico-ipam\n"; got != want {
		t.Errorf("%s = %q, want %q", images.RootFilesRecord, got, want)
	}
}

// TestNodeFromImagesLinks checks that fromImages takes a file the way the
// image has it: upstream's calico-ipam is a symbolic link to ./calico, and
// a hard link in an upper layer may name a file of a lower one
// (mutate.Extract gives the upper first).
func TestNodeFromImagesLinks(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		layers [][]tarEntry
		want   map[string]string // entry -> its content, "->target" or "~>symlink target"
	}{
		{"symlink", [][]tarEntry{{
			{name: "opt/cni/bin/calico", typ: tar.TypeReg, data: "plugin"},
			{name: "opt/cni/bin/calico-ipam", typ: tar.TypeSymlink, link: "./calico"},
		}}, map[string]string{"hwk/root/opt/cni/bin/calico": "plugin", "hwk/root/opt/cni/bin/calico-ipam": "~>./calico"}},
		{"hard link to a lower layer", [][]tarEntry{
			{{name: "opt/cni/bin/calico", typ: tar.TypeReg, data: "plugin"}},
			{{name: "opt/cni/bin/calico-ipam", typ: tar.TypeLink, link: "opt/cni/bin/calico"}},
		}, map[string]string{"hwk/root/opt/cni/bin/calico": "plugin", "hwk/root/opt/cni/bin/calico-ipam": "->hwk/root/opt/cni/bin/calico"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testBuilder(t, nodeimage.FromSource)
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".tar")
			writeTestImage(t, p, "quay.io/calico/cni:v3.31.0", tc.layers...)
			b.images = []builtImage{{Image: nodeimage.Image{Ref: "quay.io/calico/cni:v3.31.0"}, Path: p}}
			var out bytes.Buffer
			tw := tar.NewWriter(&out)
			record, err := b.layImageFiles(tw, &tarDirs{tw: tw, seen: map[string]bool{}}, nodeFromImage{Image: "quay.io/calico/cni", Files: []string{"opt/cni/bin/calico", "opt/cni/bin/calico-ipam"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := tw.Close(); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			tr := tar.NewReader(&out)
			for h, err := tr.Next(); err == nil; h, err = tr.Next() {
				switch h.Typeflag {
				case tar.TypeReg:
					data, _ := io.ReadAll(tr)
					got[h.Name] = string(data)
				case tar.TypeLink:
					got[h.Name] = "->" + h.Linkname
					if h.Mode != 0o755 {
						t.Errorf("%s has mode %o, want its target's 755", h.Name, h.Mode)
					}
				case tar.TypeSymlink:
					got[h.Name] = "~>" + h.Linkname
				}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("laid %v, want %v", got, tc.want)
			}
			if len(record) != 2 || record[1] != "quay.io/calico/cni:v3.31.0 opt/cni/bin/calico-ipam" {
				t.Errorf("record %q", record)
			}
		})
	}
}

// TestNodeFromImagesErrors checks that fromImages refuses an image that
// lacks a listed file, and a hard link to a file the recipe does not take.
func TestNodeFromImagesErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		files   []string
		want    string
	}{
		{"missing", []tarEntry{{name: "opt/cni/bin/calico", typ: tar.TypeReg, data: "x"}}, []string{"opt/cni/bin/calico", "opt/cni/bin/calico-ipam"}, "has no file opt/cni/bin/calico-ipam"},
		{"link", []tarEntry{{name: "opt/cni/bin/calico", typ: tar.TypeReg, data: "x"}, {name: "opt/cni/bin/calico-ipam", typ: tar.TypeLink, link: "opt/cni/bin/calico"}}, []string{"opt/cni/bin/calico-ipam"}, "links to opt/cni/bin/calico, which the recipe does not list"},
		{"symlink", []tarEntry{{name: "opt/cni/bin/calico", typ: tar.TypeReg, data: "x"}, {name: "opt/cni/bin/calico-ipam", typ: tar.TypeSymlink, link: "./calico"}}, []string{"opt/cni/bin/calico-ipam"}, "links to opt/cni/bin/calico, which the recipe does not list"},
		{"link to a link", []tarEntry{{name: "opt/cni/bin/calico", typ: tar.TypeSymlink, link: "install"}, {name: "opt/cni/bin/calico-ipam", typ: tar.TypeLink, link: "opt/cni/bin/calico"}, {name: "opt/cni/bin/install", typ: tar.TypeReg, data: "x"}}, []string{"opt/cni/bin/calico", "opt/cni/bin/calico-ipam", "opt/cni/bin/install"}, "links to opt/cni/bin/calico, which is not a regular file in the image"},
		{"dir", []tarEntry{{name: "opt/cni/bin/", typ: tar.TypeDir}}, []string{"opt/cni/bin"}, "is not a regular file or a link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testBuilder(t, nodeimage.FromSource)
			p := filepath.Join(dir, tc.name+".tar")
			writeTestImage(t, p, "quay.io/calico/cni:v3.31.0", tc.entries)
			b.images = []builtImage{{Image: nodeimage.Image{Ref: "quay.io/calico/cni:v3.31.0"}, Path: p}}
			var out bytes.Buffer
			tw := tar.NewWriter(&out)
			_, err := b.layImageFiles(tw, &tarDirs{tw: tw, seen: map[string]bool{}}, nodeFromImage{Image: "quay.io/calico/cni", Files: tc.files})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// writeTestImage writes an image of layers (the first at the bottom) as
// a docker-archive tarball (what the build's images are) named ref.
func writeTestImage(t *testing.T, file, ref string, layers ...[]tarEntry) {
	t.Helper()
	img := empty.Image
	for _, entries := range layers {
		data := writeTestTar(t, entries)
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			t.Fatal(err)
		}
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(file, tag, img); err != nil {
		t.Fatal(err)
	}
}

// TestWSLKernel checks stage 2 in WSL 2 through the fake wsl.exe
// (internal/drivers/wsl2's transcripts): the stage-2 tar goes in on the
// import's stdin, the script's output to the log, the export (then
// wsl.exe's message, not part of the root) comes back on stdout cleaned of
// WSL's own files, and the distribution is unregistered, also on failure.
func TestWSLKernel(t *testing.T) {
	dir := t.TempDir()
	export := filepath.Join(dir, "export.tar")
	// What bsdtar in the distribution exports (names from ./): the root
	// as stage2.sh left it, with what WSL's init put there at the first
	// start (microsoft/WSL src/linux/init: main.cpp MountInit's /init
	// placeholder; config.cpp's links to it, X11 socket directory, the
	// module directory of its kernel, ld.wsl.conf; resolv.conf a link).
	if err := os.WriteFile(export, writeTestTar(t, []tarEntry{
		{name: "./", typ: tar.TypeDir},
		{name: "./etc/", typ: tar.TypeDir},
		{name: "./etc/hostname", typ: tar.TypeReg, data: "node\n"},
		{name: "./etc/hosts", typ: tar.TypeReg, data: "# This file was automatically generated by WSL.\n127.0.1.1\tDESKTOP-4TQ2C1.\tDESKTOP-4TQ2C1\n"},
		{name: "./etc/ld.so.conf.d/", typ: tar.TypeDir},
		{name: "./etc/ld.so.conf.d/ld.wsl.conf", typ: tar.TypeReg, data: "/usr/lib/wsl/lib\n"},
		{name: "./etc/resolv.conf", typ: tar.TypeSymlink, link: "/mnt/wsl/resolv.conf"},
		{name: "./etc/wsl.conf", typ: tar.TypeReg, data: "[boot]\nsystemd=false\n"},
		{name: "./etc/wsl-distribution.conf", typ: tar.TypeReg, data: "[shortcut]\nenabled=false\n"},
		{name: "./init", typ: tar.TypeReg},
		{name: "./mnt/", typ: tar.TypeDir},
		{name: "./mnt/c/", typ: tar.TypeDir},
		{name: "./mnt/wsl/", typ: tar.TypeDir},
		{name: "./tmp/", typ: tar.TypeDir},
		{name: "./tmp/.X11-unix/", typ: tar.TypeDir},
		{name: "./usr/bin/sh", typ: tar.TypeReg, data: "sh"},
		{name: "./usr/bin/wslinfo", typ: tar.TypeSymlink, link: "/init"},
		{name: "./usr/bin/wslpath", typ: tar.TypeSymlink, link: "/init"},
		{name: "./usr/lib/modules/", typ: tar.TypeDir},
		{name: "./usr/lib/modules/6.1.0-50-cloud-amd64/", typ: tar.TypeDir},
		{name: "./usr/lib/modules/6.6.87.2-microsoft-standard-WSL2/", typ: tar.TypeDir},
		{name: "./usr/lib/wsl/", typ: tar.TypeDir},
		{name: "./usr/lib/wsl/lib/", typ: tar.TypeDir},
		{name: "./usr/sbin/mount.drvfs", typ: tar.TypeSymlink, link: "/init"},
	}), 0o644); err != nil {
		t.Fatal(err)
	}
	stage1 := filepath.Join(dir, "stage1.tar")
	if err := os.WriteFile(stage1, writeTestTar(t, []tarEntry{{name: "./usr/bin/sh", typ: tar.TypeReg, data: "sh"}}), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var log bytes.Buffer
	b := &builder{opts: nodeimage.Options{CacheDir: dir, Log: &log}}
	k := wsl2.Kernel{Runner: wsl2.CLI{}, Dir: filepath.Join(dir, "distros")}
	s := stage2{script: []byte("dpkg --configure -a\n"), add: func(tw *tar.Writer) error { return tarFile(tw, "hwk/input", []byte("x"), 0o644) }}

	fake := wsltest.New(t, "buildkernel.txt", map[string]string{"DIR": k.Dir, "EXPORT": export})
	out := filepath.Join(dir, "root.tar")
	if err := b.configure(ctx, k, "test", stage1, s, out); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	fake.Check(t)
	if !strings.Contains(log.String(), "Setting up systemd (252.39-1~deb12u1) ...") {
		t.Errorf("stage2.sh's output is not in the log:\n%s", log.String())
	}
	in, inFiles := readTestTar(t, bytes.NewReader(fake.Input(0)))
	if want := []string{"./usr/bin/sh", "etc/wsl-distribution.conf", "etc/wsl.conf", "hwk/", "hwk/stage2.sh", "hwk/input"}; !slices.Equal(in, want) {
		t.Errorf("the import read %v, want %v", in, want)
	}
	for _, setting := range []string{"useWindowsTimezone=false", "generateHosts=false", "appendWindowsPath=false", "systemd=false"} {
		if !strings.Contains(inFiles["etc/wsl.conf"], setting) {
			t.Errorf("the root's wsl.conf lacks %s", setting)
		}
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	names, files := readTestTar(t, f)
	f.Close()
	want := []string{"./", "./etc/", "./etc/hostname", "./etc/hosts", "./etc/ld.so.conf.d/", "./etc/resolv.conf", "./mnt/", "./tmp/",
		"./usr/bin/sh", "./usr/lib/modules/", "./usr/lib/modules/6.1.0-50-cloud-amd64/", "etc/mtab"}
	if !slices.Equal(names, want) {
		t.Errorf("the root holds\n  %v\nwant\n  %v", names, want)
	}
	if files["./etc/hostname"] != "node\n" || strings.Contains(files["./etc/hosts"], "WSL") {
		t.Errorf("WSL's generated files were kept: %q", files)
	}
	if c, ok := files["./etc/resolv.conf"]; !ok || c != "" {
		t.Errorf("etc/resolv.conf is not an empty file: %q %v", c, ok)
	}
	if ents, _ := os.ReadDir(k.Dir); len(ents) != 0 {
		t.Errorf("the build distribution's directory is left: %v", ents)
	}

	fake = wsltest.New(t, "buildkernel-fails.txt", map[string]string{"DIR": k.Dir})
	failed := filepath.Join(dir, "failed.tar")
	err = b.configure(ctx, k, "test", stage1, s, failed)
	fake.Check(t)
	if err == nil || !strings.Contains(err.Error(), "stage2.sh exited with 1") || !strings.Contains(err.Error(), "dpkg: error processing package systemd (--configure):") ||
		!strings.Contains(err.Error(), "in WSL 2") {
		t.Errorf("a failing stage 2: %v", err)
	}
	if _, err := os.Stat(failed); err == nil {
		t.Error("a failed stage 2 left a root")
	}

	// A distribution a killed build left (its lock free) is unregistered,
	// and its directory and lock removed, before the next build's import;
	// one whose build still runs (lock held) is left alone.
	dead, err := state.HoldLeftover(k.Dir, "hwk-build-node-0123456789ab")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(k.Dir, "hwk-build-node-0123456789ab"), 0o700); err != nil {
		t.Fatal(err)
	}
	_ = dead.Release()
	live, err := state.HoldLeftover(k.Dir, "hwk-build-node-live")
	if err != nil {
		t.Fatal(err)
	}
	fake = wsltest.New(t, "buildkernel-leftover.txt", map[string]string{"DIR": k.Dir})
	err = b.configure(ctx, k, "test", stage1, s, failed)
	fake.Check(t)
	if err == nil || !strings.Contains(err.Error(), "stage2.sh exited with 1") {
		t.Errorf("after a leftover: %v", err)
	}
	if ents, _ := os.ReadDir(k.Dir); len(ents) != 1 || ents[0].Name() != "hwk-build-node-live.lock" {
		t.Errorf("beside the running build's lock: %v", ents)
	}
	_ = live.Remove()

	// No VM for WSL: its own message and code, and both ways out.
	fake = wsltest.New(t, "buildkernel-no-vm.txt", map[string]string{"DIR": k.Dir})
	err = b.configure(ctx, k, "test", stage1, s, failed)
	fake.Check(t)
	if err == nil || !strings.Contains(err.Error(), "HCS_E_HYPERV_NOT_INSTALLED") || !strings.Contains(err.Error(), "wsl.exe --install") ||
		!strings.Contains(err.Error(), "start Docker Desktop") {
		t.Errorf("no VM for WSL: %v", err)
	}
	if ents, _ := os.ReadDir(k.Dir); len(ents) != 0 {
		t.Errorf("a failed import left %v", ents)
	}
}

// TestConfigureLeavesNothingOnFailure checks that a kernel that ends well
// without exporting anything, or fails after writing part of a tar, leaves
// no root.
func TestConfigureLeavesNothingOnFailure(t *testing.T) {
	dir := t.TempDir()
	stage1 := filepath.Join(dir, "stage1.tar")
	if err := os.WriteFile(stage1, writeTestTar(t, []tarEntry{{name: "./usr/bin/sh", typ: tar.TypeReg, data: "sh"}}), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &builder{opts: nodeimage.Options{CacheDir: dir, Log: io.Discard}}
	half := writeTestTar(t, []tarEntry{{name: "usr/bin/sh", typ: tar.TypeReg, data: strings.Repeat("x", 4096)}})
	for name, k := range map[string]nodeimage.Kernel{
		"empty export": kernelFunc(func(root io.Reader, out io.Writer) error { _, err := io.Copy(io.Discard, root); return err }),
		"cut short": kernelFunc(func(root io.Reader, out io.Writer) error {
			if _, err := io.Copy(io.Discard, root); err != nil {
				return err
			}
			if _, err := out.Write(half[:1024]); err != nil {
				return err
			}
			return errors.New("the connection to the engine broke")
		}),
		"stops reading its input": kernelFunc(func(io.Reader, io.Writer) error { return errors.New("import refused") }),
	} {
		file := filepath.Join(dir, "root.tar")
		err := b.configure(context.Background(), k, "test", stage1, stage2{script: []byte("true\n")}, file)
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		if _, serr := os.Stat(file); serr == nil {
			t.Errorf("%s: a root was left", name)
		}
		t.Logf("%s: %v", name, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left in the cache: %v", ents)
	}
}

type kernelFunc func(root io.Reader, out io.Writer) error

func (kernelFunc) Name() string { return "a test kernel" }
func (f kernelFunc) Configure(_ context.Context, _ string, root io.Reader, _, out io.Writer) error {
	return f(root, out)
}

// TestConfigureReportsTheInputsError checks that a stage-2 input that
// cannot be written (a binary gone from the cache) is the error, not the
// broken stream the kernel saw.
func TestConfigureReportsTheInputsError(t *testing.T) {
	dir := t.TempDir()
	stage1 := filepath.Join(dir, "stage1.tar")
	if err := os.WriteFile(stage1, writeTestTar(t, []tarEntry{{name: "./usr/bin/sh", typ: tar.TypeReg, data: "sh"}}), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &builder{opts: nodeimage.Options{CacheDir: dir, Log: io.Discard}}
	k := kernelFunc(func(root io.Reader, out io.Writer) error {
		if _, err := io.Copy(io.Discard, root); err != nil {
			return fmt.Errorf("import: %w", err)
		}
		return nil
	})
	s := stage2{script: []byte("true\n"), add: func(tw *tar.Writer) error {
		return tarFileFrom(tw, "hwk/root/usr/local/bin/kubeadm", filepath.Join(dir, "gone"), 0o755)
	}}
	err := b.configure(context.Background(), k, "test", stage1, s, filepath.Join(dir, "root.tar"))
	if err == nil || !strings.Contains(err.Error(), "write the stage-2 root: open "+filepath.Join(dir, "gone")) {
		t.Errorf("got %v", err)
	}
}

// TestPackagesProgress checks that the packages' progress is one
// transfer: the sum over packages, each counted once however often it
// reports.
func TestPackagesProgress(t *testing.T) {
	var got [][2]int64
	update := packagesProgress("node's Debian packages", 300, func(name string, done, total int64) {
		if name != "node's Debian packages" || total != 300 {
			t.Errorf("update(%q, %d, %d)", name, done, total)
		}
		got = append(got, [2]int64{done, total})
	})
	a := debian.LockedPackage{Name: "a", Filename: "pool/a.deb", Size: 100}
	b := debian.LockedPackage{Name: "b", Filename: "pool/b.deb", Size: 200}
	update(a, 50, 100)
	update(b, 150, 200)
	update(a, 100, 100)
	update(a, 100, 100) // Fetch's own "done" after the download's last report
	update(b, 200, 200)
	var dones []int64
	for _, g := range got {
		dones = append(dones, g[0])
	}
	if want := []int64{50, 200, 250, 250, 300}; !slices.Equal(dones, want) {
		t.Errorf("sums %v, want %v", dones, want)
	}
}
