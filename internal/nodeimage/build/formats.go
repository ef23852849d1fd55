package build

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/internal/format/diskimage"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

func (b *builder) dockerRef() string {
	return nodeimage.DockerRepository + ":" + b.opts.KubernetesVersion
}

// loadManifest returns the manifest already in the image's directory (a
// build adding formats keeps the ones it has), or a fresh one.
func (b *builder) loadManifest() *nodeimage.Manifest {
	if m, err := nodeimage.ReadManifest(b.dir); err == nil && m.Key == b.keys["node"] {
		return m
	}
	return &nodeimage.Manifest{Dir: b.dir, Artifacts: map[nodeimage.Format]nodeimage.Artifact{}}
}

// cached returns the cached manifest and which requested formats it lacks.
func (b *builder) cached(ctx context.Context) (*nodeimage.Manifest, []nodeimage.Format) {
	m, err := nodeimage.ReadManifest(b.dir)
	if err != nil || m.Key != b.keys["node"] {
		return nil, b.opts.Formats
	}
	var missing []nodeimage.Format
	for _, f := range b.opts.Formats {
		if !m.Has(ctx, f, b.opts.Docker) {
			missing = append(missing, f)
		}
	}
	return m, missing
}

// makeFormats builds the rootfs once and makes every missing format from
// it, then writes the manifest.
func (b *builder) makeFormats(ctx context.Context, m *nodeimage.Manifest, missing []nodeimage.Format) error {
	work, err := os.MkdirTemp(b.opts.CacheDir, "rootfs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	root := filepath.Join(work, "rootfs.tar")
	if err := b.makeRootfs(ctx, root); err != nil {
		return err
	}
	var disks []nodeimage.Format
	for _, f := range missing {
		var err error
		switch f {
		case nodeimage.FormatDocker:
			err = b.phase("docker", "Import into the Docker engine as "+b.dockerRef(), func() error { return b.dockerFormat(ctx, root, m) })
		case nodeimage.FormatTar:
			err = b.phase("tar", "Pack the rootfs tarball", func() error { return b.tarFormat(root, m) })
		default:
			disks = append(disks, f)
		}
		if err != nil {
			return err
		}
	}
	if len(disks) > 0 {
		var names []string
		for _, f := range disks {
			names = append(names, string(f))
		}
		err := b.phase("disk", "Make the bootable disk ("+strings.Join(names, ", ")+")", func() error { return b.diskFormats(ctx, root, disks, m) })
		if err != nil {
			return err
		}
	}
	return b.finish(m)
}

// withoutKernel streams the rootfs tar at file, without what only a VM
// needs (the recipe's kernelPaths keep their directories, empty), to fn.
func (b *builder) withoutKernel(file string, fn func(r io.Reader) error) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	pr, pw := io.Pipe()
	go func() {
		_, err := copyTar(f, pw, func(name string) (bool, []byte) {
			for _, p := range b.recipe.Debian.KernelPaths {
				if strings.HasPrefix(name, p+"/") {
					return false, nil
				}
			}
			return true, nil
		})
		pw.CloseWithError(err)
	}()
	err = fn(pr)
	pr.CloseWithError(errors.New("stopped reading the rootfs"))
	return err
}

// tarFormat packs the rootfs without its kernel as rootfs.tar.gz, for
// wsl --import.
func (b *builder) tarFormat(root string, m *nodeimage.Manifest) error {
	file := filepath.Join(b.dir, "rootfs.tar.gz")
	err := state.WriteOutput(file, 0o644, func(w *os.File) error {
		return b.withoutKernel(root, func(r io.Reader) error {
			zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
			if err != nil {
				return err
			}
			if _, err := io.Copy(zw, r); err != nil {
				return err
			}
			return zw.Close()
		})
	})
	if err != nil {
		return fmt.Errorf("pack %s: %w", file, err)
	}
	return b.record(m, nodeimage.FormatTar, file)
}

// dockerFormat imports the rootfs (without kernel) as a one-layer image.
func (b *builder) dockerFormat(ctx context.Context, root string, m *nodeimage.Manifest) error {
	if b.opts.Docker == nil {
		return fmt.Errorf("the docker format needs a Docker engine")
	}
	c, err := b.opts.Docker()
	if err != nil {
		return err
	}
	err = b.withoutKernel(root, func(r io.Reader) error {
		rc, err := c.ImageImport(ctx, client.ImageImportSource{Source: r, SourceName: "-"}, b.dockerRef(),
			client.ImageImportOptions{Changes: []string{
				`CMD ["/sbin/init"]`,
				`ENV container=docker`,
				// No STOPSIGNAL: import does not take it; the docker driver
				// sets SIGRTMIN+3 (systemd's halt) on every node it creates.
				fmt.Sprintf(`LABEL %s=%s`, nodeimage.LabelKey, b.keys["node"]),
			}})
		if err != nil {
			return err
		}
		defer rc.Close()
		return jsonStreamError(rc)
	})
	if err != nil {
		return fmt.Errorf("import %s: %w", b.dockerRef(), err)
	}
	img, err := c.ImageInspect(ctx, b.dockerRef())
	if err != nil {
		return err
	}
	m.Artifacts[nodeimage.FormatDocker] = nodeimage.Artifact{DockerImage: b.dockerRef(), DockerID: img.ID, Size: img.Size}
	return nil
}

// diskWriters write a raw disk as each VM format, in Go.
var diskWriters = map[nodeimage.Format]func(ctx context.Context, raw, out string) error{
	nodeimage.FormatQCOW2: diskimage.WriteQCOW2,
	nodeimage.FormatVHDX:  diskimage.WriteVHDX,
	nodeimage.FormatVDI:   diskimage.WriteVDI,
}

// diskFormats writes the bootable raw disk from the rootfs tar, then each
// format from it; the raw disk is removed at the end.
func (b *builder) diskFormats(ctx context.Context, root string, formats []nodeimage.Format, m *nodeimage.Manifest) error {
	f, err := os.Open(root)
	if err != nil {
		return err
	}
	defer f.Close()
	raw := filepath.Join(b.dir, "disk.raw")
	defer os.Remove(raw)
	start := time.Now()
	d, err := diskimage.WriteRawDisk(ctx, bufio.NewReaderSize(f, 1<<20), raw, diskimage.RawDiskOptions{Size: b.opts.DiskSize})
	if err != nil {
		return err
	}
	fmt.Fprintf(b.opts.Log, "disk: raw GPT disk in %s: kernel %s, %d files, %d directories, %d symlinks, %d hard links copied\n",
		time.Since(start).Round(time.Millisecond), d.Kernel, d.Files, d.Dirs, d.Symlinks, d.HardLinkCopies)
	for _, x := range d.DroppedXattrs {
		fmt.Fprintf(b.opts.Log, "disk: %s\n", x)
	}
	for _, format := range formats {
		out := filepath.Join(b.dir, "disk."+string(format))
		start := time.Now()
		if err := diskWriters[format](ctx, raw, out); err != nil {
			return err
		}
		fmt.Fprintf(b.opts.Log, "disk: %s in %s\n", format, time.Since(start).Round(time.Millisecond))
		if err := b.record(m, format, out); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) record(m *nodeimage.Manifest, f nodeimage.Format, file string) error {
	sum, size, err := fileSHA256(file)
	if err != nil {
		return err
	}
	m.Artifacts[f] = nodeimage.Artifact{Path: filepath.Base(file), SHA256: sum, Size: size}
	return nil
}

// recordBinaries puts each component's version and each binary's
// checksum in the manifest.
func (b *builder) recordBinaries(m *nodeimage.Manifest) error {
	for i := range b.recipe.Components {
		c := &b.recipe.Components[i]
		m.Components[c.Name] = b.version(c)
	}
	m.Binaries = map[string]nodeimage.Artifact{}
	for name, p := range b.bins {
		sum, size, err := fileSHA256(p)
		if err != nil {
			return err
		}
		m.Binaries[name] = nodeimage.Artifact{SHA256: sum, Size: size}
	}
	return nil
}

// finish fills in the manifest and writes it, last.
func (b *builder) finish(m *nodeimage.Manifest) error {
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
	return m.Write()
}
