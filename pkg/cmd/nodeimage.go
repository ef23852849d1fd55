package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/drivers/wsl2"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
	"github.com/hwk-dev/hwk/pkg/state"
	"github.com/hwk-dev/hwk/pkg/ui"
)

func newNodeImageCommand(g *globals, s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node-image",
		Short: "Build, list, pull, push, save and load the node images clusters are made from",
		Args:  cobra.NoArgs,
	}
	build := &cobra.Command{
		Use:   "build",
		Short: "Build a node image: linux, or windows from your Windows Server ISO",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("name the node OS to build: 'hwk node-image build linux' or 'hwk node-image build windows --iso PATH'")
		},
	}
	build.AddCommand(newNodeImageBuildLinuxCommand(g, s), newNodeImageBuildWindowsCommand(g, s))
	cmd.AddCommand(build, newNodeImageListCommand(s),
		newNodeImagePullCommand(g, s), newNodeImagePushCommand(g, s),
		newNodeImageSaveCommand(g, s), newNodeImageLoadCommand(g, s))
	return cmd
}

func newNodeImageBuildLinuxCommand(g *globals, s Streams) *cobra.Command {
	opts := nodeimage.Options{}
	var source, formats string
	cmd := &cobra.Command{
		Use:   "linux",
		Short: "Build the Linux node image into every driver's format",
		Long: `Build the Linux node image: one Debian rootfs with systemd, containerd, runc,
the CNI plugins, kubeadm, kubelet and kubectl, and every container image a
cluster needs (Kubernetes, etcd, CoreDNS, pause, Calico) preloaded, so that
'hwk up' pulls nothing. From that rootfs it makes the formats asked for:

  docker   an image in the Docker engine (docker driver)
  tar      a rootfs tarball (WSL2)
  qcow2    a bootable UEFI disk for libvirt
  vhdx     the same disk for Hyper-V
  vdi      the same disk for VirtualBox

--source release downloads official binaries (checked against their
published checksums) and pulls images from their registries. --source source
builds everything from the Go module proxy instead, for machines with no
registry access. Results are cached by their inputs: building again with
nothing changed takes seconds. Building needs a Docker engine, where the
Debian root is configured (no root, no debootstrap); on Windows without
one, WSL 2 configures it instead.`,
		Example: `  hwk node-image build linux --source source --formats docker,qcow2`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Source = nodeimage.Source(source)
			opts.Formats = splitFormats(formats)
			m, err := g.buildLinux(c.Context(), s, opts)
			if err != nil {
				return err
			}
			printArtifacts(s.Out, m)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.KubernetesVersion, "kubernetes-version", config.DefaultKubernetesVersion, "Kubernetes version to build the image for")
	f.StringVar(&source, "source", string(nodeimage.Release), "where binaries and images come from: release (official downloads) or source (built from the Go module proxy)")
	f.StringVar(&formats, "formats", "docker,tar,qcow2,vhdx,vdi", "comma-separated formats to make: docker, tar, qcow2, vhdx, vdi")
	return cmd
}

// buildLinux builds the Linux node image opts describe into hwk's cache,
// showing each step, with every command's output in a build log.
func (g *globals) buildLinux(ctx context.Context, s Streams, opts nodeimage.Options) (*nodeimage.Manifest, error) {
	opts.CacheDir = state.DefaultDirs().Cache
	// Bad flags are reported before anything is written.
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	status := ui.NewStatus(s.ErrOut, g.quiet)
	opts.Step = status.Step
	log, closeLog, err := buildLog(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	defer closeLog()
	opts.Log = g.buildOutput(log, status, s)
	// One client for the whole build: the docker format and stage 2.
	opts.Docker = dockerClient()
	opts.Kernel = stageKernel(ctx, opts.Docker, opts.CacheDir)
	opts.Transfers = func() (func(string, int64, int64), func()) {
		t := ui.NewTransfers(status, s.ErrOut)
		return t.Update, t.Stop
	}
	start := time.Now()
	m, err := g.build(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("%w\n(full build log: %s)", err, log.Name())
	}
	fmt.Fprintf(s.Out, "Node image %s ready in %s\n", m.Name, ui.FormatDuration(time.Since(start)))
	return m, nil
}

// stageKernel is where the Debian roots' second stage runs: the Docker
// engine when it answers with Linux containers (nil), else, on an amd64
// Windows, WSL 2. With neither, the Docker kernel's error says what to
// start.
func stageKernel(ctx context.Context, docker func() (client.APIClient, error), cacheDir string) nodeimage.Kernel {
	// The root is amd64: WSL on an arm64 Windows runs an arm64 kernel.
	if runtime.GOOS != "windows" || runtime.GOARCH != "amd64" {
		return nil
	}
	if c, err := docker(); err == nil {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		// Docker Desktop switched to Windows containers answers too.
		if p, err := c.Ping(ctx, client.PingOptions{}); err == nil && p.OSType == "linux" {
			return nil
		}
	}
	return wsl2.Kernel{Runner: wsl2.CLI{}, Dir: filepath.Join(cacheDir, "build", "wsl")}
}

func splitFormats(s string) []nodeimage.Format {
	var out []nodeimage.Format
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, nodeimage.Format(f))
		}
	}
	return out
}

// buildOutput is where a build's commands write: the build log, and with
// -v the terminal too.
func (g *globals) buildOutput(log io.Writer, status *ui.Status, s Streams) io.Writer {
	if g.verbosity > 0 {
		return io.MultiWriter(log, status.Writer(s.ErrOut))
	}
	return log
}

// buildLog opens the file every command of a build writes its output to.
func buildLog(cacheDir string) (*os.File, func(), error) {
	dir := cacheDir + string(os.PathSeparator) + "logs"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	f, err := os.Create(dir + string(os.PathSeparator) + "node-image-build-" + time.Now().Format("20060102-150405") + ".log")
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}

func printArtifacts(w io.Writer, m *nodeimage.Manifest) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range nodeimage.Formats {
		a, ok := m.Artifacts[f]
		if !ok {
			continue
		}
		where := a.DockerImage
		if a.Path != "" {
			where = m.Dir + string(os.PathSeparator) + a.Path
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f, ui.Size(a.Size), where)
	}
	tw.Flush()
}

func newNodeImageListCommand(s Streams) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the node images in the cache: versions, source, formats and sizes",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			list, err := nodeimage.List(state.DefaultDirs().Cache)
			if err != nil {
				return err
			}
			public := make([]*nodeimage.Manifest, 0, len(list))
			for _, m := range list {
				public = append(public, m.Public())
			}
			return out.print(s.Out, public, func() {
				if len(list) == 0 {
					fmt.Fprintln(s.Out, "No node images yet; build one with: hwk node-image build linux")
					return
				}
				tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tOS\tKUBERNETES\tSOURCE\tFORMATS\tSIZE\tBUILT\tCOMPONENTS")
				for _, m := range list {
					var fs []string
					for _, f := range nodeimage.Formats {
						if _, ok := m.Artifacts[f]; ok {
							fs = append(fs, string(f))
						}
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Label(), m.KubernetesVersion, m.Source,
						strings.Join(fs, ","), ui.Size(m.Size()), m.Built.Local().Format("2006-01-02 15:04"), components(m))
				}
				tw.Flush()
			})
		},
	}
	out.register(cmd, "text", "text", "json", "yaml")
	return cmd
}

func components(m *nodeimage.Manifest) string {
	var s []string
	for _, c := range []string{"containerd", "runc", "etcd", "coredns", "calico"} {
		if v, ok := m.Components[c]; ok {
			s = append(s, c+" "+v)
		}
	}
	return strings.Join(s, ", ")
}
