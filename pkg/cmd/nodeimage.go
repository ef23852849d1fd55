package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/wsl2"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
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
	f.StringVar(&where, "configure-in", configureAuto, "the Linux kernel the Debian root is configured in: auto (Docker, else WSL 2 on Windows, else a libvirt VM), docker, wsl2 or libvirt")
	f.BoolVar(&dryRun, "dry-run", false, "make nothing: print each component (built from source or downloaded), whether it is cached and its cache directory, then the node image")
	return cmd
}

// planLinux prints what a build of opts would make and what is cached.
func planLinux(ctx context.Context, s Streams, opts nodeimage.Options) error {
	opts.CacheDir = state.DefaultDirs().Cache
	opts.Docker = dockerClient()
	plan, err := nodeimage.Plan(ctx, opts)
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
// defaultFormats says the formats are --formats' default, from which the
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
		if err := dockerAnswers(ctx, opts.Docker); err != nil {
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

// The values of --configure-in besides the drivers that boot kernels.
const (
	configureAuto   = "auto"
	configureDocker = "docker"
	configureWSL    = "wsl2"
)

// stageKernel sets where the Debian roots' second stage runs, as where
// says. auto is the Docker engine when it answers with Linux containers,
// else, on an amd64 Windows, WSL 2, else the first driver that boots
// kernels (libvirt) and passes its preflight; with none of them, the
// error names each and what to start.
func (g *globals) stageKernel(ctx context.Context, opts *nodeimage.Options, where string) error {
	// Asked once: the engine matters to the docker format, to
	// --configure-in docker and to auto.
	needDocker := slices.Contains(opts.Formats, nodeimage.FormatDocker) || where == configureDocker
	var dockerErr error
	if needDocker || where == configureAuto {
		dockerErr = dockerAnswers(ctx, opts.Docker)
	}
	// The docker format goes into the engine whatever configures the
	// root: without one, say so before minutes of building.
	if needDocker && dockerErr != nil {
		if where == configureDocker {
			return fmt.Errorf("--configure-in docker: %w\n  fix: start Docker, or use --configure-in auto", dockerErr)
		}
		return fmt.Errorf("the docker format goes into a Docker engine: %w\n  fix: start Docker, or leave docker out of --formats (say --formats tar,qcow2)", dockerErr)
	}
	wsl := wsl2.Kernel{Runner: wsl2.CLI{}, Dir: filepath.Join(opts.CacheDir, "build", "wsl")}
	// The registry makes fresh drivers on each call: one for this choice.
	r := g.registry()
	switch where {
	case configureDocker:
		return nil
	case configureWSL:
		if runtime.GOOS != "windows" || !nativeAMD64() {
			return fmt.Errorf("--configure-in wsl2: WSL 2 configures the root only on an amd64 Windows (the root is amd64)")
		}
		if err := wsl.Check(ctx); err != nil {
			return fmt.Errorf("--configure-in wsl2: %w", err)
		}
		opts.Kernel = wsl
		return nil
	case configureAuto:
	default:
		d, err := r.Get(where)
		if err != nil {
			return fmt.Errorf("--configure-in: %w", err)
		}
		vm, ok := d.(drivers.KernelBooter)
		if !ok {
			return fmt.Errorf("--configure-in %s: that driver cannot boot a kernel; use auto, docker, wsl2 or one of: %s", where, strings.Join(kernelBooters(r), ", "))
		}
		opts.VM = vm
		return nil
	}
	if dockerErr == nil {
		return nil
	}
	why := []string{"Docker: " + dockerErr.Error() + "; start Docker (Docker Desktop on Windows and macOS, or dockerd on Linux)"}
	switch {
	// The root is amd64: WSL on an arm64 Windows runs an arm64 kernel.
	case runtime.GOOS == "windows" && nativeAMD64():
		err := wsl.Check(ctx)
		if err == nil {
			opts.Kernel = wsl
			return nil
		}
		why = append(why, "WSL 2: "+reason(err))
	case runtime.GOOS == "windows":
		why = append(why, "WSL 2: only on an amd64 Windows")
	default:
		why = append(why, "WSL 2: only on Windows")
	}
	for _, name := range kernelBooters(r) {
		d, _ := r.Get(name)
		if _, err := drivers.Preflight(ctx, d); err != nil {
			why = append(why, name+": "+reason(err))
			continue
		}
		opts.VM = d.(drivers.KernelBooter)
		return nil
	}
	return fmt.Errorf("no Linux kernel to configure the node's Debian root in; start one of these and build again:\n  %s", strings.Join(why, "\n  "))
}

// reason is a driver's refusal on one line: its reason and fix.
func reason(err error) string {
	if u, ok := errors.AsType[*drivers.UnavailableError](err); ok {
		if u.Fix != "" {
			return u.Reason + "; " + u.Fix
		}
		return u.Reason
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// dockerAnswers says why the engine cannot configure a root: it does not
// answer, or it runs Windows containers (Docker Desktop switched).
func dockerAnswers(ctx context.Context, docker func() (client.APIClient, error)) error {
	c, err := docker()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := c.Ping(ctx, client.PingOptions{})
	if err != nil {
		return err
	}
	if p.OSType != "" && p.OSType != "linux" {
		return fmt.Errorf("the engine runs %s containers, switch Docker Desktop to Linux containers", p.OSType)
	}
	return nil
}

// kernelBooters lists the drivers that can boot a kernel for stage 2.
func kernelBooters(r *drivers.Registry) []string {
	var out []string
	for _, n := range r.Names() {
		if d, err := r.Get(n); err == nil {
			if _, ok := d.(drivers.KernelBooter); ok {
				out = append(out, n)
			}
		}
	}
	return out
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
	if m.Windows != nil {
		// The build and revision the node runs: what its container
		// images must suit, and its patch level.
		s = append(s, "windows "+m.Windows.BuildString())
	}
	for _, c := range []string{"containerd", "runc", "etcd", "coredns", "calico"} {
		if v, ok := m.Components[c]; ok {
			s = append(s, c+" "+v)
		}
	}
	return strings.Join(s, ", ")
}
