package build

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// builtImage is a container image archive ready to preload.
type builtImage struct {
	nodeimage.Image
	Path string // docker-archive tarball
}

// packFormat is part of every image's cache key: bump it whenever
// packImage or layerFiles change what they write, so cached archives made
// by older code are not reused.
const packFormat = 3

// epoch stamps every file and config of images hwk makes, so the same
// inputs give the same digests.
var epoch = time.Unix(0, 0).UTC()

// buildImages makes or pulls every image the node carries, under the names
// and tags kubeadm (and the pinned Calico manifest) use.
func (b *builder) buildImages(ctx context.Context) error {
	refs, err := b.imageRefs(ctx)
	if err != nil {
		return err
	}
	dir := filepath.Join(b.opts.CacheDir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	file := func(ref string) string {
		return filepath.Join(dir, fmt.Sprintf("%s-%s.tar", fileName(ref), hashJSON([]string{b.keys["images"], ref})[:12]))
	}
	// The userland base gets steps of its own, before the images that
	// need it (whose steps cannot hold others).
	for i, spec := range b.recipe.Images {
		if _, err := os.Stat(file(refs[i])); b.opts.Source == nodeimage.FromSource && spec.Base == "userland" && err != nil {
			if _, err := b.userland(ctx); err != nil {
				return fmt.Errorf("the images' Debian userland: %w", err)
			}
			break
		}
	}
	for i := range b.recipe.Images {
		spec := &b.recipe.Images[i]
		ref := refs[i]
		file := file(ref)
		verb := "Pack"
		if b.opts.Source == nodeimage.Release {
			verb = "Pull"
		}
		label := fmt.Sprintf("%s %s", verb, ref)
		_, statErr := os.Stat(file)
		if statErr == nil {
			label += " (cached)"
		}
		err := b.step(label, func() error {
			if statErr != nil {
				var err error
				if b.opts.Source == nodeimage.FromSource {
					err = b.packImage(ctx, spec, ref, file)
				} else {
					err = b.pullImage(ctx, ref, file)
				}
				if err != nil {
					return fmt.Errorf("image %s: %w", ref, err)
				}
			}
			im, err := archiveInfo(file, ref)
			if err != nil {
				return fmt.Errorf("image %s: %w", ref, err)
			}
			b.images = append(b.images, im)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// imageRefs returns each recipe image's reference: Kubernetes' images
// under the tags kubeadm gives them (the image's kubeadmTag, a template of
// its component's pinned version), the others as pinned. Where this host
// runs the build's kubeadm (linux/amd64), it fails unless `kubeadm config
// images list` names exactly those; elsewhere stage2.sh makes that check.
func (b *builder) imageRefs(ctx context.Context) ([]string, error) {
	refs := make([]string, len(b.recipe.Images))
	for i, spec := range b.recipe.Images {
		tag := spec.Tag
		if tag == kubeadmTag {
			tmpl := spec.KubeadmTag
			if tmpl == "" {
				tmpl = "{{.Version}}"
			}
			var err error
			if tag, err = expand(tmpl, vars{Version: b.version(b.recipe.component(spec.Component))}); err != nil {
				return nil, fmt.Errorf("image %s: %w", spec.Name, err)
			}
		}
		refs[i] = spec.Name + ":" + tag
	}
	if !b.runsLinuxAMD64() {
		return refs, nil
	}
	cfg := filepath.Join(b.opts.CacheDir, "build", "kubeadm-images-"+b.opts.KubernetesVersion+".yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfg, []byte(b.kubeadmConfig()), 0o644); err != nil {
		return nil, err
	}
	out, err := hostexec.Output(hostexec.Command(ctx, b.bins["kubernetes/kubeadm"], "config", "images", "list", "--config", cfg))
	if err != nil {
		return nil, fmt.Errorf("list kubeadm's images: %w", err)
	}
	if err := b.checkKubeadmImages(strings.Fields(string(out)), refs); err != nil {
		return nil, err
	}
	return refs, nil
}

// kubeadmTag is the tag of a recipe image whose tag kubeadm decides.
const kubeadmTag = "kubeadm"

// runsLinuxAMD64 reports whether this host runs the binaries built for
// the node.
func (b *builder) runsLinuxAMD64() bool {
	if b.hostRunsNode != nil {
		return *b.hostRunsNode
	}
	return runtime.GOOS == "linux" && runtime.GOARCH == "amd64"
}

// checkKubeadmImages compares what kubeadm lists with the refs of the
// recipe's kubeadm-tagged images.
func (b *builder) checkKubeadmImages(listed, refs []string) error {
	wanted := map[string]string{} // repository → tag
	for _, line := range listed {
		repo, tag, ok := strings.Cut(line, ":")
		if !ok {
			return fmt.Errorf("kubeadm config images list printed %q, not an image reference", line)
		}
		wanted[repo] = tag
	}
	for i, spec := range b.recipe.Images {
		if spec.Tag != kubeadmTag {
			continue
		}
		t, ok := wanted[spec.Name]
		if !ok {
			return fmt.Errorf("the recipe preloads %s, but kubeadm %s does not use it", spec.Name, b.opts.KubernetesVersion)
		}
		delete(wanted, spec.Name)
		if _, tag, _ := strings.Cut(refs[i], ":"); tag != t {
			c := b.recipe.component(spec.Component)
			return fmt.Errorf("kubeadm %s wants %s:%s, but the recipe pins %s %s (tag %s); update node-images/linux/components.yaml",
				b.opts.KubernetesVersion, spec.Name, t, c.Name, b.version(c), tag)
		}
	}
	for repo, tag := range wanted {
		return fmt.Errorf("kubeadm %s uses %s:%s, which images/linux.yaml does not preload", b.opts.KubernetesVersion, repo, tag)
	}
	return nil
}

// kubeadmConfig returns the configuration kubeadm lists the images for: the
// build's Kubernetes version, and a node name, since kubeadm validates a
// whole InitConfiguration and its default, the host name, may be no DNS
// name (a Windows computer's under WSL, say MY_PC).
func (b *builder) kubeadmConfig() string {
	return `apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: node
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: ` + b.opts.KubernetesVersion + "\n"
}

// kubeadmImages returns what stage2.sh expects `kubeadm config images list`
// to print: the refs of the images whose tag kubeadm decides, sorted.
func (b *builder) kubeadmImages() string {
	byKubeadm := map[string]bool{}
	for _, spec := range b.recipe.Images {
		byKubeadm[spec.Name] = spec.Tag == kubeadmTag
	}
	var refs []string
	for _, im := range b.images {
		if repo, _, _ := strings.Cut(im.Ref, ":"); byKubeadm[repo] {
			refs = append(refs, im.Ref)
		}
	}
	slices.Sort(refs)
	return strings.Join(refs, "\n") + "\n"
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

func fileName(ref string) string { return unsafeName.ReplaceAllString(ref, "_") }

// packImage makes a minimal image from built binaries: scratch or the
// userland base, plus one layer of files.
func (b *builder) packImage(ctx context.Context, spec *imageSpec, ref, file string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	img := empty.Image
	if spec.Base == "userland" {
		base, err := b.userland(ctx)
		if err != nil {
			return err
		}
		l, err := tarball.LayerFromFile(base)
		if err != nil {
			return err
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return err
		}
	}
	files, err := b.layerFiles(ctx, spec)
	if err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files)), nil
	})
	if err != nil {
		return err
	}
	if img, err = mutate.AppendLayers(img, l); err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, spec.Env...)
	cfg.Config.Entrypoint = spec.Entrypoint
	cfg.Config.Cmd = spec.Cmd
	cfg.Config.User = spec.User
	cfg.Config.Labels = map[string]string{"dev.hwk.built-from": "source"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	return writeArchive(file, tag, img)
}

// mergedUsr returns p, a path under one of Debian's merged-/usr symlinks
// (/bin -> usr/bin, ...), moved to where the link points.
func mergedUsr(p string) string {
	// Why: a layer that wrote bin/x would declare bin a directory and hide
	// the base's /bin symlink, and with it /bin/sh.
	for _, d := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		if strings.HasPrefix(p, d+"/") {
			return "usr/" + p
		}
	}
	return p
}

// layerFiles returns the image's own layer as an uncompressed tar.
func (b *builder) layerFiles(ctx context.Context, spec *imageSpec) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	mkdirs := func(p string, uid int) error {
		var parts []string
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			parts = append([]string{d}, parts...)
		}
		for _, d := range parts {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, Uid: uid, Gid: uid, ModTime: epoch}); err != nil {
				return err
			}
		}
		return nil
	}
	userland := spec.Base == "userland"
	add := func(p string, data []byte, mode int64, uid int) error {
		if userland {
			p = mergedUsr(p)
		}
		if err := mkdirs(p, uid); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(data)), Uid: uid, Gid: uid, ModTime: epoch}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	first := map[string]string{} // binary → its first path in the image
	for _, f := range spec.Files {
		// A binary at two paths (calico and calico-ipam) is stored once.
		if p, ok := first[f.From]; ok {
			to := f.To
			if userland {
				to = mergedUsr(to)
			}
			if err := mkdirs(to, 0); err != nil {
				return nil, err
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeLink, Name: to, Linkname: p, Mode: 0o755, ModTime: epoch}); err != nil {
				return nil, err
			}
			continue
		}
		first[f.From] = f.To
		if userland {
			first[f.From] = mergedUsr(f.To)
		}
		data, err := os.ReadFile(b.bins[f.From])
		if err != nil {
			return nil, err
		}
		if err := add(f.To, data, 0o755, 0); err != nil {
			return nil, err
		}
	}
	for _, t := range spec.Tree {
		root, err := b.moduleDir(ctx, spec.Component, t.Module)
		if err != nil {
			return nil, err
		}
		src := filepath.Join(root, filepath.FromSlash(t.From))
		err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(src, p)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			// Module zips keep no file modes; the scripts must run.
			return add(path.Join(t.To, filepath.ToSlash(rel)), data, 0o755, 0)
		})
		if err != nil {
			return nil, fmt.Errorf("copy %s from %s: %w", t.From, t.Module, err)
		}
	}
	for _, e := range spec.Empty {
		if err := add(e.Path, nil, 0o644, e.UID); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// moduleDir finds a module's directory in the module cache, as resolved
// by the component's wrapper module.
func (b *builder) moduleDir(ctx context.Context, component, module string) (string, error) {
	c := b.recipe.component(component)
	// The wrapper module is written again: the binaries may have come
	// from a cache that has them but not it.
	mod, sum, err := b.moduleFiles(c)
	if err != nil {
		return "", err
	}
	src, err := b.writeModule(c, mod, sum)
	if err != nil {
		return "", err
	}
	// go mod download, not go list -m: it fetches the module (checked
	// against go.sum) when this user's module cache lacks it, which it
	// does when the binaries came from a cache.
	cmd := hostexec.Command(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	out, err := hostexec.Output(cmd)
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &m); jerr == nil && m.Error != "" {
		return "", fmt.Errorf("download module %s: %s", module, m.Error)
	}
	if err != nil {
		return "", fmt.Errorf("download module %s: %w", module, err)
	}
	if m.Dir == "" {
		return "", fmt.Errorf("go mod download gave no directory for module %s", module)
	}
	return m.Dir, nil
}

// pullImage fetches ref's linux/amd64 image from its registry.
func (b *builder) pullImage(ctx context.Context, ref, file string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"})}
	if b.opts.HTTP != nil {
		opts = append(opts, remote.WithTransport(b.opts.HTTP.Transport))
	}
	img, err := remote.Image(tag, opts...)
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	return writeArchive(file, tag, img)
}

// writeArchive writes img as a docker-archive tarball (what ctr import
// reads), atomically.
func writeArchive(file string, tag name.Tag, img v1.Image) error {
	tmp := file + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, file)
}

// archiveInfo reads an archive's digest back for the manifest.
func archiveInfo(file, ref string) (builtImage, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return builtImage{}, err
	}
	img, err := tarball.ImageFromPath(file, &tag)
	if err != nil {
		return builtImage{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return builtImage{}, err
	}
	st, err := os.Stat(file)
	if err != nil {
		return builtImage{}, err
	}
	return builtImage{Image: nodeimage.Image{Ref: ref, Digest: d.String(), Size: st.Size()}, Path: file}, nil
}
