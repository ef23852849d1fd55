package cmd

import (
	"context"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/internal/nodeimage/build"
	"github.com/hwk-dev/hwk/internal/nodeimage/stage2"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

func newNodeImageBuildLinuxCommand(g *globals, s Streams) *cobra.Command {
	opts := nodeimage.Options{}
	var source, formats, where string
	var dryRun bool
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
Debian root is configured (no root, no debootstrap); without one, WSL 2 on
Windows or a libvirt VM on Linux configures it instead (--configure-in).`,
		Example: `  hwk node-image build linux --source source --formats docker,qcow2
  hwk node-image build linux --source source --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Source = nodeimage.Source(source)
			opts.Formats = splitFormats(formats)
			if dryRun {
				return planLinux(c.Context(), s, opts)
			}
			m, err := g.buildLinux(c.Context(), s, opts, where, !c.Flags().Changed("formats"))
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
	f.StringVar(&where, "configure-in", stage2.Auto, "the Linux kernel the Debian root is configured in: auto (Docker, else WSL 2 on Windows, else a libvirt VM), docker, wsl2 or libvirt")
	f.BoolVar(&dryRun, "dry-run", false, "make nothing: print each component (built from source or downloaded), whether it is cached and its cache directory, then the node image")
	return cmd
}

// planLinux prints what a build of opts would make and what is cached.
func planLinux(ctx context.Context, s Streams, opts nodeimage.Options) error {
	opts.CacheDir = state.DefaultDirs().Cache
	opts.Docker = dockerClient()
	plan, err := build.Plan(ctx, opts)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PART\tVERSION\tFROM\tCACHED\tDIRECTORY")
	for _, p := range plan {
		name := p.Name
		if p.What == "image" {
			name = "node image " + p.Name
		}
		cached := "no"
		if p.Cached {
			cached = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, p.Version, p.From, cached, p.Dir)
	}
	return tw.Flush()
}

// buildLinux builds the Linux node image opts describe into hwk's cache,
// showing each step, with every command's output in a build log.
// defaultFormats reports whether the formats are --formats' default, from which the
// docker format is left out where no engine answers.
func (g *globals) buildLinux(ctx context.Context, s Streams, opts nodeimage.Options, where string, defaultFormats bool) (*nodeimage.Manifest, error) {
	opts.CacheDir = state.DefaultDirs().Cache
	// Bad flags are reported before anything is written.
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	// One client for the whole build: the docker format and stage 2.
	opts.Docker = dockerClient()
	if defaultFormats && slices.Contains(opts.Formats, nodeimage.FormatDocker) {
		if err := stage2.DockerAnswers(ctx, opts.Docker); err != nil {
			opts.Formats = slices.DeleteFunc(opts.Formats, func(f nodeimage.Format) bool { return f == nodeimage.FormatDocker })
			fmt.Fprintf(s.ErrOut, "No Docker engine answers (%v): making %s, without the docker format.\n", err, nodeimage.JoinFormats(opts.Formats))
		}
	}
	if err := g.configureIn(ctx, &opts, where); err != nil {
		return nil, err
	}
	status := g.newStatus(s)
	opts.Step = status.Step
	log, closeLog, err := buildLog(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	defer closeLog()
	opts.Log = g.buildOutput(log, status, s)
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
