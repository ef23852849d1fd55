package build

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/internal/download"
	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/node-images/linux"
	"github.com/hwk-dev/hwk/node-images/windows"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// binaries builds or downloads every component's binaries, each component
// cached on its own key.
func (b *builder) binaries(ctx context.Context) error {
	for i := range b.recipe.Components {
		c := &b.recipe.Components[i]
		need := b.needed(c)
		if len(need) == 0 {
			continue
		}
		dir := b.componentDir(c)
		src := b.sourceOf(c)
		verb := "Build"
		if src == nodeimage.Release {
			verb = "Download"
		}
		name := fmt.Sprintf("%s %s %s", verb, c.Name, b.version(c))
		if src != b.opts.Source {
			name += " (its release: it needs cgo, which only a linux/amd64 host builds)"
		}
		if done(dir) {
			name += " (cached)"
		}
		err := b.step(name, func() error {
			if !done(dir) {
				if err := os.RemoveAll(dir); err != nil {
					return err
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				var err error
				if src == nodeimage.FromSource {
					err = b.buildComponent(ctx, c, dir)
				} else {
					err = b.downloadComponent(ctx, c, need, dir)
				}
				if err != nil {
					return fmt.Errorf("%s %s: %w", strings.ToLower(verb), c.Name, err)
				}
				if err := markDone(dir); err != nil {
					return err
				}
			}
			for _, bin := range need {
				p := filepath.Join(dir, bin)
				if _, err := os.Stat(p); err != nil {
					return fmt.Errorf("%s %s did not produce %s: %w", strings.ToLower(verb), c.Name, bin, err)
				}
				b.bins[c.Name+"/"+bin] = p
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// componentDir returns where c's binaries are kept, by its cache key.
func (b *builder) componentDir(c *component) string {
	return filepath.Join(b.opts.CacheDir, "build", fmt.Sprintf("%s-%s-%s", c.Name, b.version(c), b.keys["component/"+c.Name][:12]))
}

// needed lists the binaries this build takes from c: from source, all of
// them (images are made from them too); from releases, only those
// installed on the node, since images are pulled whole.
func (b *builder) needed(c *component) []string {
	if b.sourceOf(c) == nodeimage.FromSource {
		return c.binaries()
	}
	var out []string
	for bin := range c.Install {
		out = append(out, bin)
	}
	slices.Sort(out)
	return out
}

// sourceOf returns where c's binaries come from: the build's source,
// except that a source build on a host that cannot build a Linux
// component with cgo (runc: libcontainer/nsenter is C) takes the
// component's release (checked against its published SHA-256) instead.
func (b *builder) sourceOf(c *component) nodeimage.Source {
	if b.opts.Source == nodeimage.FromSource && c.Source.CGO && b.goos != "windows" && !b.runsLinuxAMD64() && len(c.Release) > 0 {
		return nodeimage.Release
	}
	return b.opts.Source
}

// done reports whether dir holds a finished step's output: the marker is
// written last, so an interrupted build is redone, never trusted.
func done(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ".done"))
	return err == nil
}

func markDone(dir string) error {
	return os.WriteFile(filepath.Join(dir, ".done"), nil, 0o644)
}

// moduleFiles returns the wrapper module (go.mod, go.sum) for c, from
// the first of the build's module trees that has it.
func (b *builder) moduleFiles(c *component) (mod, sum string, err error) {
	name, err := expand(c.Source.Module, vars{Version: b.version(c)})
	if err != nil {
		return "", "", err
	}
	for _, fsys := range b.modules() {
		m, err := fs.ReadFile(fsys, "modules/"+name+".mod")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", "", err
		}
		s, err := fs.ReadFile(fsys, "modules/"+name+".sum")
		if err != nil {
			return "", "", fmt.Errorf("wrapper module %s has no go.sum: %w", name, err)
		}
		return string(m), string(s), nil
	}
	return "", "", fmt.Errorf("no wrapper module %s for --source source; versions with one: %s (or use --source release)", name, strings.Join(b.wrapperVersions(c), ", "))
}

// modules returns the recipe trees holding wrapper modules, searched in
// order: the Windows recipe's own, then the Linux recipe's, which both
// images share.
func (b *builder) modules() []fs.FS {
	if b.recipeModules != nil {
		return b.recipeModules
	}
	if b.goos == "windows" {
		return []fs.FS{windows.Recipe, linux.Recipe}
	}
	return []fs.FS{linux.Recipe}
}

func (b *builder) wrapperVersions(c *component) []string {
	prefix := c.Name + "-"
	var out []string
	for _, fsys := range b.modules() {
		entries, _ := fs.ReadDir(fsys, "modules")
		for _, e := range entries {
			if v, ok := strings.CutSuffix(e.Name(), ".mod"); ok && strings.HasPrefix(v, prefix) {
				out = append(out, strings.TrimPrefix(v, prefix))
			}
		}
	}
	return out
}

// buildComponent builds c's binaries into dir with the Go toolchain, for
// linux/amd64 (the Windows image's for windows/amd64) on any host.
func (b *builder) buildComponent(ctx context.Context, c *component, dir string) error {
	v := vars{Name: c.Name, Version: b.version(c)}
	mod, sum, packages, err := b.componentModule(c)
	if err != nil {
		return err
	}
	src, err := b.writeModule(c, mod, sum)
	if err != nil {
		return err
	}
	if c.Source.Main != "" {
		main, err := fs.ReadFile(images.Recipe, c.Source.Main)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(src, path.Base(c.Source.Main)), main, 0o644); err != nil {
			return err
		}
	}
	ldflags := []string{"-s", "-w"}
	for _, f := range c.Source.LDFlags {
		x, err := expand(f, v)
		if err != nil {
			return err
		}
		ldflags = append(ldflags, x)
	}
	tags := slices.Clone(c.Source.Tags)
	if c.Source.Static {
		ldflags = append(ldflags, "-extldflags", "-static")
		tags = append(tags, "netgo", "osusergo")
	}
	args := []string{"build", "-trimpath", "-ldflags", strings.Join(ldflags, " ")}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, "-o", dir+string(filepath.Separator))
	args = append(args, packages...)
	cmd := hostexec.Command(ctx, "go", args...)
	cmd.Dir = src
	cgo := "0"
	if c.Source.CGO {
		cgo = "1"
	}
	// The module proxy and build cache come from the user's Go environment
	// (so both are shared across builds); what is built does not.
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOOS="+b.targetOS(), "GOARCH=amd64",
		"GOFLAGS=-mod=readonly -buildvcs=false", "GOWORK=off")
	if err := b.run(cmd); err != nil {
		return err
	}
	for from, to := range c.Source.Rename {
		if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
			return err
		}
	}
	return nil
}

// writeModule writes c's module (go.mod, go.sum) into a directory of
// its own (not the binaries', which holds only outputs), rewritten on
// every use, and returns the directory.
func (b *builder) writeModule(c *component, mod, sum string) (string, error) {
	src := filepath.Join(b.opts.CacheDir, "build", "modules", c.Name+"-"+b.version(c))
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(mod), 0o644); err != nil {
		return "", err
	}
	return src, os.WriteFile(filepath.Join(src, "go.sum"), []byte(sum), 0o644)
}

// componentModule returns the module c is built in and the packages built: a
// wrapper module from the recipe, or for a one-file program (Main) a
// module of its own holding it.
func (b *builder) componentModule(c *component) (mod, sum string, packages []string, err error) {
	if c.Source.Main != "" {
		return "module hwk.dev/nodeimage/" + c.Name + "\n\ngo 1.24\n", "", []string{"."}, nil
	}
	mod, sum, err = b.moduleFiles(c)
	return mod, sum, c.Source.Packages, err
}

// run runs cmd with its output in the build log; a failure is a
// *hostexec.Error with stderr's last lines, which tell why.
func (b *builder) run(cmd *exec.Cmd) error {
	cmd.Stdout, cmd.Stderr = b.opts.Log, b.opts.Log
	return hostexec.Run(cmd)
}

// downloadComponent fetches c's release artifacts and puts the binaries
// this build needs into dir.
func (b *builder) downloadComponent(ctx context.Context, c *component, need []string, dir string) error {
	dl := &download.Client{HTTP: b.opts.HTTP, CacheDir: filepath.Join(b.opts.CacheDir, "downloads")}
	got := map[string]bool{}
	for _, a := range c.Release {
		names := a.Names
		if len(names) == 0 {
			names = []string{""}
		}
		for _, n := range names {
			if n != "" && !slices.Contains(need, n) {
				continue
			}
			v := vars{Name: n, Version: b.version(c)}
			url, err := expand(a.URL, v)
			if err != nil {
				return err
			}
			v.URL = url
			sums, err := expand(a.Sums, v)
			if err != nil {
				return err
			}
			file, _, err := dl.FetchVerified(ctx, url, sums, path.Base(url))
			if err != nil {
				return err
			}
			switch {
			case len(a.Extract) > 0:
				if err := extract(file, a.Extract, dir, got); err != nil {
					return fmt.Errorf("%s: %w", url, err)
				}
			default:
				bin := n
				if a.As != "" {
					bin = a.As
				}
				if err := copyFile(file, filepath.Join(dir, bin), 0o755); err != nil {
					return err
				}
				got[bin] = true
			}
		}
	}
	for _, n := range need {
		if !got[n] {
			return fmt.Errorf("no release artifact in the recipe provides %s", n)
		}
	}
	return nil
}

// extract copies the members of a .tar.gz named in members (by base name)
// to dir under their binary names.
func extract(archive string, members map[string]string, dir string, got map[string]bool) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		bin, ok := members[path.Base(h.Name)]
		if !ok || h.Typeflag != tar.TypeReg {
			continue
		}
		if err := writeFile(filepath.Join(dir, bin), tr, 0o755); err != nil {
			return err
		}
		got[bin] = true
	}
	for member, bin := range members {
		if !got[bin] {
			return fmt.Errorf("archive has no %s", member)
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return writeFile(dst, f, mode)
}

func writeFile(dst string, r io.Reader, mode os.FileMode) error {
	tmp := dst + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}

// fileSHA256 returns a file's SHA-256 and size, for the manifest.
func fileSHA256(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}
