package nodeimage

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"

	linux "github.com/hwk-dev/hwk/node-images/linux"
	"github.com/hwk-dev/hwk/pkg/diskimage"
)

// DockerRepository is where the docker format's images are tagged, one tag
// per Kubernetes version.
const DockerRepository = "hwk/node"

// LabelKey marks a docker-format image with its build's input key, so a
// cached build can tell the engine still holds exactly that image.
const LabelKey = "dev.hwk.node-image.key"

func (b *builder) dockerRef() string { return DockerRepository + ":" + b.opts.KubernetesVersion }

// loadManifest returns the manifest already in the image's directory (a
// build adding formats keeps the ones it has), or a fresh one.
func (b *builder) loadManifest() *Manifest {
	if m, err := readManifest(b.dir); err == nil && m.Key == b.keys["node"] {
		return m
	}
	return &Manifest{Dir: b.dir, Artifacts: map[Format]Artifact{}}
}

// cached returns the cached manifest and which requested formats it lacks.
func (b *builder) cached(ctx context.Context) (*Manifest, []Format) {
	m, err := readManifest(b.dir)
	if err != nil || m.Key != b.keys["node"] {
		return nil, b.opts.Formats
	}
	var missing []Format
	for _, f := range b.opts.Formats {
		if !m.Has(ctx, f, b.opts.Docker) {
			missing = append(missing, f)
		}
	}
	return m, missing
}

// makeFormats builds the rootfs once and makes every missing format from
// it, then writes the manifest.
func (b *builder) makeFormats(ctx context.Context, m *Manifest, missing []Format) error {
	if err := needRoot(); err != nil {
		return err
	}
	work, err := os.MkdirTemp(b.opts.CacheDir, "rootfs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	root := filepath.Join(work, "rootfs")
	if err := b.stage("rootfs", func() error {
		return b.step("Make the node rootfs (Debian "+b.recipe.Debian.Suite+")", func() error { return b.makeRootfs(ctx, root) })
	}); err != nil {
		return err
	}
	var disks []string
	for _, f := range missing {
		var err error
		switch f {
		case FormatDocker:
			err = b.stage("docker", func() error {
				return b.step("Import into the Docker engine as "+b.dockerRef(), func() error { return b.dockerFormat(ctx, root, m) })
			})
		case FormatTar:
			err = b.stage("tar", func() error {
				return b.step("Pack the rootfs tarball", func() error { return b.tarFormat(ctx, root, m) })
			})
		default:
			disks = append(disks, string(f))
		}
		if err != nil {
			return err
		}
	}
	if len(disks) > 0 {
		err := b.stage("disk", func() error {
			return b.step("Make the bootable disk ("+strings.Join(disks, ", ")+")", func() error { return b.diskFormats(ctx, root, disks, m) })
		})
		if err != nil {
			return err
		}
	}
	return b.finish(m)
}

func (b *builder) tarFormat(ctx context.Context, root string, m *Manifest) error {
	file := filepath.Join(b.dir, "rootfs.tar.gz")
	if err := b.tarDir(ctx, root, file+".tmp", b.recipe.Debian.KernelPaths, true); err != nil {
		return err
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		return err
	}
	return b.record(m, FormatTar, file)
}

// dockerFormat imports the rootfs (without kernel) as a one-layer image.
func (b *builder) dockerFormat(ctx context.Context, root string, m *Manifest) error {
	if b.opts.Docker == nil {
		return fmt.Errorf("the docker format needs a Docker engine")
	}
	c, err := b.opts.Docker()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "tar", tarArgs(root, "-", b.recipe.Debian.KernelPaths)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	tail := &tailWriter{max: 20}
	cmd.Stderr = tail
	if err := cmd.Start(); err != nil {
		return err
	}
	rc, err := c.ImageImport(ctx, client.ImageImportSource{Source: stdout, SourceName: "-"}, b.dockerRef(),
		client.ImageImportOptions{Changes: []string{
			`CMD ["/sbin/init"]`,
			`ENV container=docker`,
			// No STOPSIGNAL: import does not take it; the docker driver
			// sets SIGRTMIN+3 (systemd's halt) on every node it creates.
			fmt.Sprintf(`LABEL %s=%s`, LabelKey, b.keys["node"]),
		}})
	if err == nil {
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
	}
	if werr := cmd.Wait(); werr != nil && err == nil {
		err = fmt.Errorf("tar: %w\n%s", werr, tail)
	}
	if err != nil {
		return fmt.Errorf("import %s: %w", b.dockerRef(), err)
	}
	img, err := c.ImageInspect(ctx, b.dockerRef())
	if err != nil {
		return err
	}
	m.Artifacts[FormatDocker] = Artifact{DockerImage: b.dockerRef(), DockerID: img.ID, Size: img.Size}
	return nil
}

func (b *builder) diskFormats(ctx context.Context, root string, formats []string, m *Manifest) error {
	script, err := fs.ReadFile(linux.Recipe, "disk.sh")
	if err != nil {
		return err
	}
	files, err := diskimage.Build(ctx, script, root, b.dir, b.opts.DiskSize, formats, b.opts.Log)
	if err != nil {
		return err
	}
	for _, f := range slices.Sorted(maps.Keys(files)) {
		if err := b.record(m, Format(f), files[f]); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) record(m *Manifest, f Format, file string) error {
	sum, size, err := fileSHA256(file)
	if err != nil {
		return err
	}
	m.Artifacts[f] = Artifact{Path: filepath.Base(file), SHA256: sum, Size: size}
	return nil
}

// recordBinaries puts each component's version and each binary's
// checksum in the manifest.
func (b *builder) recordBinaries(m *Manifest) error {
	for i := range b.recipe.Components {
		c := &b.recipe.Components[i]
		m.Components[c.Name] = b.version(c)
	}
	m.Binaries = map[string]Artifact{}
	for name, p := range b.bins {
		sum, size, err := fileSHA256(p)
		if err != nil {
			return err
		}
		m.Binaries[name] = Artifact{SHA256: sum, Size: size}
	}
	return nil
}

// finish fills in the manifest and writes it, last.
func (b *builder) finish(m *Manifest) error {
	m.Name, m.OS = filepath.Base(b.dir), "linux"
	m.KubernetesVersion, m.Source, m.Key = b.opts.KubernetesVersion, b.opts.Source, b.keys["node"]
	m.Built = time.Now().UTC().Truncate(time.Second)
	m.Components = map[string]string{"debian": b.recipe.Debian.Suite}
	if b.goVer != "" {
		m.Components["go"] = b.goVer
	}
	if err := b.recordBinaries(m); err != nil {
		return err
	}
	m.Images = nil
	for _, im := range b.images {
		m.Images = append(m.Images, im.Image)
	}
	m.Stages = b.stages
	return m.write()
}
