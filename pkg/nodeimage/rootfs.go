package nodeimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/hwk-dev/hwk/images"
	linux "github.com/hwk-dev/hwk/node-images/linux"
)

// needRoot explains why a build that must make a rootfs cannot go on.
func needRoot() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("making the node rootfs needs a Linux host (debootstrap, chroot); on %s, run the build inside a Linux VM or WSL2", runtime.GOOS)
	}
	if os.Geteuid() == 0 {
		return nil
	}
	return errors.New("making the node rootfs needs root (debootstrap, chroot, device files); run it as root, e.g. sudo -E hwk node-image build linux")
}

// debootstrapped returns a cached tarball of a Debian root with the given
// packages, making it on first use. post, if set, is a recipe script run
// on the root before it is packed.
func (b *builder) debootstrapped(ctx context.Context, kind string, d Debian, post []byte) (_ string, err error) {
	script, file, err := debootstrapTar(b.opts.CacheDir, kind, d, post)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	if err := needRoot(); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(filepath.Join(b.opts.CacheDir), "debootstrap-")
	if err != nil {
		return "", err
	}
	// A killed debootstrap leaves mounts in work, which a plain
	// RemoveAll would walk into.
	defer func() { err = errors.Join(err, removeWork(work)) }()
	root := filepath.Join(work, "root")
	pkgs := strings.Join(d.Packages, ",")
	if err := b.runScript(ctx, script, root, d.Suite, d.Mirror, pkgs); err != nil {
		return "", fmt.Errorf("debootstrap %s %s: %w", kind, d.Suite, err)
	}
	if post != nil {
		if err := b.runScript(ctx, post, root); err != nil {
			return "", fmt.Errorf("prepare %s root: %w", kind, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return "", err
	}
	if err := b.tarDir(ctx, root, file+".tmp", nil, false); err != nil {
		return "", err
	}
	return file, os.Rename(file+".tmp", file)
}

// debootstrapTar returns debootstrap.sh and the file the root it makes
// for d is cached in, named for everything that shapes it.
func debootstrapTar(cacheDir, kind string, d Debian, post []byte) (script []byte, file string, err error) {
	script, err = fs.ReadFile(linux.Recipe, "debootstrap.sh")
	if err != nil {
		return nil, "", err
	}
	key := hashJSON([]any{d.Suite, d.Mirror, d.Packages, string(script), string(post)})
	return script, filepath.Join(cacheDir, "debootstrap", fmt.Sprintf("%s-%s-%s.tar", kind, d.Suite, key[:12])), nil
}

// DebootstrapTars are where a build with cacheDir keeps the node's and the
// userland's debootstrapped roots for today's recipe (made on first use):
// the oracle hack/debianlock's test compares the Debian locks with.
func DebootstrapTars(cacheDir string) (node, userland string, err error) {
	r, err := loadRecipe()
	if err != nil {
		return "", "", err
	}
	post, err := fs.ReadFile(images.Recipe, "userland.sh")
	if err != nil {
		return "", "", err
	}
	if _, node, err = debootstrapTar(cacheDir, "node", r.Debian, nil); err != nil {
		return "", "", err
	}
	_, userland, err = debootstrapTar(cacheDir, "userland", r.Userland, post)
	return node, userland, err
}

// userland is the base layer of images that need a small Debian.
func (b *builder) userland(ctx context.Context) (string, error) {
	post, err := fs.ReadFile(images.Recipe, "userland.sh")
	if err != nil {
		return "", err
	}
	return b.debootstrapped(ctx, "userland", b.recipe.Userland, post)
}

// runScript runs a recipe script with sh.
func (b *builder) runScript(ctx context.Context, script []byte, args ...string) error {
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-s", "--"}, args...)...)
	cmd.Stdin = bytes.NewReader(script)
	return b.run(cmd)
}

// tarDir packs root into file with GNU tar, which keeps what a root
// filesystem needs (owners by number, xattrs and capabilities, hard
// links). Kernel-only paths are left out when asked.
func (b *builder) tarDir(ctx context.Context, root, file string, exclude []string, gz bool) error {
	args := tarArgs(root, file, exclude)
	if gz {
		args = append([]string{"-z"}, args...)
	}
	return b.run(exec.CommandContext(ctx, "tar", args...))
}

// tarArgs are GNU tar's arguments to pack root into file ("-" for
// stdout), leaving out the pseudo-filesystems and the exclude paths.
func tarArgs(root, file string, exclude []string) []string {
	args := []string{"--numeric-owner", "--xattrs", "--xattrs-include=*", "--sort=name",
		"--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*"}
	for _, p := range exclude {
		args = append(args, "--exclude=./"+p+"/*")
	}
	return append(args, "-C", root, "-cf", file, ".")
}

// makeRootfs lays out the node's root filesystem in dir: the Debian base,
// the recipe's files, the binaries, the configure script, and the
// preloaded images.
func (b *builder) makeRootfs(ctx context.Context, root string) error {
	base, err := b.debootstrapped(ctx, "node", b.recipe.Debian, nil)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if err := b.run(exec.CommandContext(ctx, "tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-C", root, "-xpf", base)); err != nil {
		return fmt.Errorf("unpack base: %w", err)
	}
	if err := b.layFiles(root); err != nil {
		return err
	}
	for i := range b.recipe.Components {
		c := &b.recipe.Components[i]
		for bin, dest := range c.Install {
			if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(path.Dir(dest))), 0o755); err != nil {
				return err
			}
			if err := copyFile(b.bins[c.Name+"/"+bin], filepath.Join(root, filepath.FromSlash(dest)), 0o755); err != nil {
				return fmt.Errorf("install %s: %w", dest, err)
			}
		}
	}
	script, err := fs.ReadFile(linux.Recipe, "configure.sh")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "chroot", root, "/bin/sh", "-s")
	cmd.Stdin = bytes.NewReader(script)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive"}
	if err := b.run(cmd); err != nil {
		return fmt.Errorf("configure.sh: %w", err)
	}
	return b.preload(ctx, root)
}

// layFiles copies node-images/linux/files over the root. Files named
// *.tmpl are templates; files in bin/ and sbin/ directories are
// executable (embedded files carry no mode).
func (b *builder) layFiles(root string) error {
	data := map[string]string{"PauseImage": b.pauseImage()}
	return fs.WalkDir(linux.Recipe, "files", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "files" {
			return err
		}
		rel := strings.TrimPrefix(p, "files/")
		dest := filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(rel, ".tmpl")))
		if d.IsDir() {
			return os.MkdirAll(dest, 0o755)
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
		mode := os.FileMode(0o644)
		if dir := path.Base(path.Dir(rel)); dir == "bin" || dir == "sbin" {
			mode = 0o755
		}
		if err := os.WriteFile(dest, content, mode); err != nil {
			return err
		}
		return os.Chmod(dest, mode)
	})
}

// pauseImage is the sandbox image reference, as kubeadm names it.
func (b *builder) pauseImage() string {
	for _, im := range b.images {
		if strings.HasPrefix(im.Ref, "registry.k8s.io/pause:") {
			return im.Ref
		}
	}
	return ""
}

// preload imports every image into the root's containerd store by running
// the node's own containerd on the build host against the root's
// /var/lib/containerd. Only content and metadata are written
// (--no-unpack): containerd unpacks an image into the node's snapshotter
// the first time a container needs it, so nothing here depends on the
// build host's filesystem supporting overlayfs.
func (b *builder) preload(ctx context.Context, root string) error {
	tmp, err := os.MkdirTemp("", "hwk-ctd-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	sock := filepath.Join(tmp, "containerd.sock")
	cfg := fmt.Sprintf(`version = 3
root = %q
state = %q
# Only the content and image stores are needed; nothing may touch the
# build host's /run, /opt or network.
disabled_plugins = [
  "io.containerd.grpc.v1.cri",
  "io.containerd.cri.v1.images",
  "io.containerd.cri.v1.runtime",
  "io.containerd.podsandbox.controller.v1.podsandbox",
  "io.containerd.sandbox.controller.v1.shim",
  "io.containerd.nri.v1.nri",
]
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins.'io.containerd.internal.v1.opt']
  path = %q
`, filepath.Join(root, "var/lib/containerd"), filepath.Join(tmp, "state"), sock, sock+".ttrpc", filepath.Join(tmp, "opt"))
	if err := os.WriteFile(filepath.Join(tmp, "config.toml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	containerd := exec.Command(b.bins["containerd/containerd"], "--config", filepath.Join(tmp, "config.toml"))
	log := &tailWriter{max: 30}
	containerd.Stdout, containerd.Stderr = log, log
	if err := containerd.Start(); err != nil {
		return fmt.Errorf("start containerd for preloading: %w", err)
	}
	defer func() {
		_ = containerd.Process.Signal(syscall.SIGTERM)
		_ = containerd.Wait()
	}()
	ctr := func(args ...string) error {
		return b.run(exec.CommandContext(ctx, b.bins["containerd/ctr"], append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...))
	}
	deadline := time.Now().Add(30 * time.Second)
	for ctr("version") != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd for preloading did not come up:\n%s", log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, im := range b.images {
		if err := ctr("images", "import", "--no-unpack", "--platform", "linux/amd64", im.Path); err != nil {
			return fmt.Errorf("preload %s: %w", im.Ref, err)
		}
	}
	return nil
}
