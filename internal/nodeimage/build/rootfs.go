package build

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/node-images/linux"
)

// userland returns the base layer of images that need a small Debian: the
// userland lock's root, configured by images/userland.sh, cached by both.
func (b *builder) userland(ctx context.Context) (string, error) {
	script, err := fs.ReadFile(images.Recipe, "userland.sh")
	if err != nil {
		return "", err
	}
	lockData, err := fs.ReadFile(images.Recipe, "userland.lock.yaml")
	if err != nil {
		return "", err
	}
	file := filepath.Join(b.opts.CacheDir, "debian", "userland-"+hashJSON([]any{string(lockData), string(script), rootFormat})[:12]+".tar")
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	lock, err := readLock(images.Recipe, "userland.lock.yaml")
	if err != nil {
		return "", err
	}
	return file, b.configuredRoot(ctx, "userland", lock, stage2{script: script}, file)
}

// makeRootfs writes the node's root file system to file, as a tar: the
// Debian root of node-images/linux/debian.lock.yaml, configured by
// stage2.sh with the recipe's files, the binaries, configure.sh and the
// preloaded images.
func (b *builder) makeRootfs(ctx context.Context, file string) error {
	lock, err := readLock(linux.Recipe, "debian.lock.yaml")
	if err != nil {
		return err
	}
	s, err := b.nodeStage2()
	if err != nil {
		return err
	}
	return b.configuredRoot(ctx, "node", lock, s, file)
}

// nodeStage2 returns the node's stage 2: stage2.sh, with configure.sh, hwk's
// files and the binaries under /hwk/root, the images under /hwk/preload,
// and what kubeadm must list (kubeadmConfig and kubeadmImages).
func (b *builder) nodeStage2() (stage2, error) {
	script, err := fs.ReadFile(linux.Recipe, "stage2.sh")
	if err != nil {
		return stage2{}, err
	}
	configure, err := fs.ReadFile(linux.Recipe, "configure.sh")
	if err != nil {
		return stage2{}, err
	}
	add := func(tw *tar.Writer) error {
		if err := tarFile(tw, stage2Dir+"/configure.sh", configure, 0o755); err != nil {
			return err
		}
		if err := tarFile(tw, stage2Dir+"/kubeadm-images.yaml", []byte(b.kubeadmConfig()), 0o644); err != nil {
			return err
		}
		if err := tarFile(tw, stage2Dir+"/kubeadm-images", []byte(b.kubeadmImages()), 0o644); err != nil {
			return err
		}
		// writeStage2Tar has written /hwk itself.
		dirs := tarDirs{tw: tw, seen: map[string]bool{stage2Dir: true}}
		if err := b.layFiles(tw, &dirs, stage2Dir+"/root"); err != nil {
			return err
		}
		for i := range b.recipe.Components {
			c := &b.recipe.Components[i]
			for _, bin := range slices.Sorted(maps.Keys(c.Install)) {
				dest := path.Join(stage2Dir, "root", c.Install[bin])
				if err := dirs.parents(dest); err != nil {
					return err
				}
				if err := tarFileFrom(tw, dest, b.bins[c.Name+"/"+bin], 0o755); err != nil {
					return fmt.Errorf("install %s: %w", c.Install[bin], err)
				}
			}
		}
		var record []string
		for _, f := range b.recipe.FromImages {
			lines, err := b.layImageFiles(tw, &dirs, f)
			if err != nil {
				return err
			}
			record = append(record, lines...)
		}
		if len(record) > 0 {
			dest := path.Join(stage2Dir, "root", images.RootFilesRecord)
			if err := dirs.parents(dest); err != nil {
				return err
			}
			if err := tarFile(tw, dest, []byte(strings.Join(record, "\n")+"\n"), 0o644); err != nil {
				return err
			}
		}
		if err := dirs.parents(stage2Dir + "/preload/x"); err != nil {
			return err
		}
		for i, im := range b.images {
			if err := tarFileFrom(tw, fmt.Sprintf("%s/preload/%02d.tar", stage2Dir, i), im.Path, 0o644); err != nil {
				return fmt.Errorf("preload %s: %w", im.Ref, err)
			}
		}
		return nil
	}
	return stage2{script: script, add: add}, nil
}

// layImageFiles writes the files f names, as its image has them (regular
// files, and links between them), into tw under /hwk/root, and returns
// their lines of images.RootFilesRecord.
func (b *builder) layImageFiles(tw *tar.Writer, dirs *tarDirs, f nodeFromImage) ([]string, error) {
	i := slices.IndexFunc(b.images, func(im builtImage) bool { return strings.HasPrefix(im.Ref, f.Image+":") })
	if i < 0 {
		return nil, fmt.Errorf("fromImages: no image %s was built", f.Image)
	}
	ref := b.images[i].Ref
	img, err := tarball.ImageFromPath(b.images[i].Path, nil)
	if err != nil {
		return nil, fmt.Errorf("fromImages %s: %w", ref, err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	root := path.Join(stage2Dir, "root")
	fail := func(format string, a ...any) error {
		return fmt.Errorf("fromImages %s: %s", ref, fmt.Sprintf(format, a...))
	}
	listed := func(name, target string) error {
		if !slices.Contains(f.Files, target) {
			return fail("%s links to %s, which the recipe does not list", name, target)
		}
		return nil
	}
	laid := map[string]int64{}   // mode of each regular file laid
	links := map[string]string{} // hard link -> its target
	seen := map[string]bool{}
	tr := tar.NewReader(rc)
	for len(seen) < len(f.Files) {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fail("%v", err)
		}
		// mutate.Extract gives names through filepath.Clean: backslashes on
		// Windows, which builds Linux node images too.
		name := path.Clean(strings.TrimPrefix(filepath.ToSlash(h.Name), "/"))
		if seen[name] || !slices.Contains(f.Files, name) {
			continue
		}
		seen[name] = true
		dest := path.Join(root, name)
		if err := dirs.parents(dest); err != nil {
			return nil, err
		}
		switch h.Typeflag {
		case tar.TypeReg:
			laid[name] = h.Mode & 0o7777
			err = tarFrom(tw, dest, tr, h.Size, laid[name])
		case tar.TypeSymlink:
			// Upstream's calico-ipam is a symbolic link to ./calico
			// (calico cni-plugin/Makefile); hwk's own image has a hard
			// link. Either must point at a file laid beside it.
			target := h.Linkname
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(name), target)
			}
			if err := listed(name, path.Clean(strings.TrimPrefix(target, "/"))); err != nil {
				return nil, err
			}
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: dest, Linkname: h.Linkname, Mode: 0o777, ModTime: epoch})
		case tar.TypeLink:
			// Written once every file is: mutate.Extract gives the top
			// layer first, so a link can come before its target.
			target := path.Clean(strings.TrimPrefix(h.Linkname, "/"))
			if err := listed(name, target); err != nil {
				return nil, err
			}
			links[name] = target
		default:
			return nil, fail("%s is not a regular file or a link in the image", name)
		}
		if err != nil {
			return nil, fail("%s: %v", name, err)
		}
	}
	var record []string
	for _, name := range f.Files {
		if !seen[name] {
			return nil, fmt.Errorf("fromImages: image %s has no file %s", ref, name)
		}
		if target, ok := links[name]; ok {
			mode, ok := laid[target]
			if !ok {
				return nil, fail("%s links to %s, which is not a regular file in the image", name, target)
			}
			// The link carries the target's mode: extractors set a link's
			// mode on the inode both names share.
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeLink, Name: path.Join(root, name), Linkname: path.Join(root, target), Mode: mode, ModTime: epoch}); err != nil {
				return nil, err
			}
		}
		record = append(record, ref+" "+name)
	}
	return record, nil
}

// tarDirs writes each directory entry a tar needs once, parents first
// (root-owned, 0755), for the entries under /hwk.
type tarDirs struct {
	tw   *tar.Writer
	seen map[string]bool
}

// parents writes the directories above name that are not written yet.
func (d *tarDirs) parents(name string) error {
	dir := path.Dir(name)
	if dir == "." || dir == "/" || d.seen[dir] {
		return nil
	}
	if err := d.parents(dir); err != nil {
		return err
	}
	d.seen[dir] = true
	return d.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: epoch})
}

// layFiles writes node-images/linux/files into tw under prefix. Files
// named *.tmpl are templates; files in bin/ and sbin/ directories are
// executable (embedded files carry no mode).
func (b *builder) layFiles(tw *tar.Writer, dirs *tarDirs, prefix string) error {
	data := map[string]string{"PauseImage": b.pauseImage()}
	return fs.WalkDir(linux.Recipe, "files", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "files" {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel := strings.TrimPrefix(p, "files/")
		dest := path.Join(prefix, strings.TrimSuffix(rel, ".tmpl"))
		if err := dirs.parents(dest); err != nil {
			return err
		}
		content, err := fs.ReadFile(linux.Recipe, p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(rel, ".tmpl") {
			t, err := template.New(rel).Option("missingkey=error").Parse(string(content))
			if err != nil {
				return fmt.Errorf("recipe %s: %w", p, err)
			}
			var out bytes.Buffer
			if err := t.Execute(&out, data); err != nil {
				return fmt.Errorf("recipe %s: %w", p, err)
			}
			content = out.Bytes()
		}
		mode := int64(0o644)
		if dir := path.Base(path.Dir(rel)); dir == "bin" || dir == "sbin" {
			mode = 0o755
		}
		return tarFile(tw, dest, content, mode)
	})
}

// pauseImage returns the sandbox image reference, as kubeadm names it.
func (b *builder) pauseImage() string {
	for _, im := range b.images {
		if strings.HasPrefix(im.Ref, "registry.k8s.io/pause:") {
			return im.Ref
		}
	}
	return ""
}
