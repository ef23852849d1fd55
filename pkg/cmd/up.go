package cmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hwk-dev/hwk/internal/nodeimage/stage2"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

func newUpCommand(g *globals, s Streams) *cobra.Command {
	var (
		flags      clusterFlags
		kubecfg    string
		noSwitch   bool
		nodesWait  time.Duration
		pull       string
		recreate   bool
		autostart  bool
		buildImage bool
	)
	cmd := &cobra.Command{
		Use:   "up [--config FILE] [flags]",
		Short: "Create a cluster",
		Long: `Create a cluster: the node network, every node's machine (at once), the
control plane with kubeadm, Calico (with what Windows nodes need), the
Windows components, the workers, and a kubeconfig context hwk-NAME that
kubectl can use at once. Each step prints its time.

The cluster comes from the config the way 'hwk config validate' shows it:
the file, then the flags, then defaults (one Linux control plane and one
Windows worker). A step that fails names itself and what went wrong, and
leaves the cluster for inspection; 'hwk down' removes it, or 'hwk up
--recreate' removes it and makes it again.

A Linux node image the cache lacks is pulled: the one this hwk build pins
for the Kubernetes version, by digest (from images.registry when the config
sets a mirror), or the reference --image names; only the formats the
nodes' drivers boot from. With no network, up stops before making anything
and names the other ways to get the image. --build-image then builds it
here (configured in Docker, WSL 2 or a libvirt VM; from release downloads
when they answer, else from source) and goes on; on a terminal, up offers that build and its time.`,
		Example: `  hwk up --windows-workers 0          # Linux-only: one control-plane node
  hwk up --config cluster.yaml
  hwk up --name ci --linux-workers 1 --windows-workers 0 --driver docker
  hwk up --windows-workers 0 --image registry.example.com/hwk/node:v1.35.4`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !slices.Contains(cluster.PullPolicies, cluster.PullPolicy(pull)) {
				return fmt.Errorf("--pull %q is not a pull policy; use missing (default), always or never", pull)
			}
			cfg, err := flags.resolve(c, g)
			if err != nil {
				return err
			}
			if autostart {
				cfg.Autostart = true
			}
			up := func() (*cluster.UpResult, error) {
				return g.provider(s, kubecfg).Up(c.Context(), cfg, cluster.UpOptions{
					SetCurrentContext: !noSwitch,
					Timeouts:          cluster.Timeouts{NodesReady: nodesWait},
					Pull:              cluster.PullPolicy(pull),
					Recreate:          recreate,
				})
			}
			res, err := up()
			// Nodes on drivers of different formats may each lack one.
			builds := map[string]bool{}
			for range 3 {
				built, berr := g.offerBuild(c.Context(), s, err, buildImage, builds)
				if berr != nil {
					return berr
				}
				if !built {
					break
				}
				res, err = up()
			}
			var step *cluster.StepError
			if errors.As(err, &step) && !g.quiet {
				return &shownError{err: err, summary: fmt.Sprintf("hwk up stopped at %q (details above)", step.Step)}
			}
			if err != nil {
				return err
			}
			if g.quiet {
				return nil
			}
			fmt.Fprintf(s.Out, "Cluster %q is ready: API server after %s, all nodes Ready after %s (%s in all).\n",
				cfg.Name, ui.FormatDuration(res.APIReady), ui.FormatDuration(res.NodesReady), ui.FormatDuration(res.Total))
			if res.AutoSubnet {
				fmt.Fprintf(s.Out, "  nodes on %s, the first free subnet (set networking.nodeSubnet to choose one)\n", res.Subnet)
			}
			fmt.Fprintf(s.Out, "  kubectl --context %s get nodes\n", res.Context)
			if !cfg.HasWindows() {
				fmt.Fprintf(s.Out, "It has no Windows worker: %s.\n", cluster.WindowsImageHelp)
			}
			return nil
		},
	}
	flags.register(cmd)
	cmd.Flags().StringVar(&kubecfg, "kubeconfig", "", "kubeconfig file to add the cluster to (default: $KUBECONFIG, else ~/.kube/config)")
	cmd.Flags().BoolVar(&noSwitch, "no-switch-context", false, "add the context but leave kubectl's current context as it is")
	cmd.Flags().StringVar(&pull, "pull", string(cluster.PullMissing), "when to pull node images: missing (when the cache has none), always (ask the registry every time), never (use the cache only)")
	_ = cmd.RegisterFlagCompletionFunc("pull", cobra.FixedCompletions([]string{"missing", "always", "never"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().BoolVar(&autostart, "autostart", false, "start the cluster's VMs with the host (as autostart: true in the config); container nodes always come back with their engine")
	cmd.Flags().BoolVar(&buildImage, "build-image", false, "when no Linux node image is cached or can be pulled, build it (minutes from release downloads, tens of minutes from source) and go on")
	cmd.Flags().BoolVar(&recreate, "recreate", false, "delete the cluster first if anything of it exists (a half-made one after a failed or killed up, or a working one), then make it")
	cmd.Flags().DurationVar(&nodesWait, "wait", 0, "how long to wait for every node to be Ready (default "+cluster.DefaultTimeouts.NodesReady.String()+")")
	return cmd
}

// sourceBuildTime is what a first build from source took, measured on a
// two-core machine with the Go module proxy near (11m8s); a release build
// downloads the binaries instead.
const sourceBuildTime = "about 11 minutes the first time on two cores, more on a slow network"

// offerBuild builds the Linux node image an up stopped for, when
// --build-image asked for that or the user answers yes, and reports whether
// it built one, so that up can run again. built holds what it built before
// for this up: an image still missing after its build is an error.
func (g *globals) offerBuild(ctx context.Context, s Streams, upErr error, asked bool, built map[string]bool) (bool, error) {
	// Why up can run again at once: an up that stops for a missing image
	// has made nothing yet.
	var missing *nodeimage.NoImageError
	if !errors.As(upErr, &missing) || missing.Node.OS != config.Linux {
		return false, nil
	}
	what := missing.Version + "/" + string(missing.Format)
	if built[what] {
		return false, fmt.Errorf("built the Linux node image for Kubernetes %s (%s format), but up still finds none: %w", missing.Version, missing.Format, upErr)
	}
	// Nothing to offer: no flag, and no one to ask (CI, a pipe, -q).
	if !asked && (g.quiet || !g.terminal(s)) {
		return false, nil
	}
	_, goErr := exec.LookPath("go")
	relErr := g.releases(ctx, missing.Version)
	if relErr != nil && goErr != nil {
		if asked {
			return false, fmt.Errorf("--build-image: the Linux node image cannot be built here: Kubernetes' release downloads do not answer (%v) and Go, which builds it from source, is not installed; install Go 1.26 or load an image (`hwk node-image load -i FILE`)", relErr)
		}
		return false, nil
	}
	source, from, takes := nodeimage.Release, "Kubernetes' release downloads", "a few minutes"
	if relErr != nil {
		source, from, takes = nodeimage.FromSource, "source through the Go module proxy", sourceBuildTime
	}
	if !asked {
		fmt.Fprintf(s.ErrOut, "\nBuild the Linux node image for Kubernetes %s here and go on? It is built from %s and configured in Docker, WSL 2 or a libvirt VM, whichever runs here (%s), then cached. [y/N] ", missing.Version, from, takes)
		answer, _ := bufio.NewReader(s.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return false, nil
		}
	}
	fmt.Fprintf(s.ErrOut, "Building the Linux node image for Kubernetes %s (%s format) from %s (%s)\n", missing.Version, missing.Format, from, takes)
	opts := nodeimage.Options{KubernetesVersion: missing.Version, Source: source, Formats: []nodeimage.Format{missing.Format}}
	_, err := g.buildLinux(ctx, s, opts, stage2.Auto, false)
	if err != nil && source == nodeimage.Release && goErr == nil {
		fmt.Fprintf(s.ErrOut, "The build from release downloads failed (above); building from source instead (%s)\n", sourceBuildTime)
		opts.Source = nodeimage.FromSource
		_, err = g.buildLinux(ctx, s, opts, stage2.Auto, false)
	}
	if err != nil {
		return false, fmt.Errorf("build the missing Linux node image: %w", err)
	}
	built[what] = true
	return true, nil
}

// interactive reports whether a question can be put to the user: both
// its input and where hwk writes progress are a terminal.
func interactive(s Streams) bool {
	in, ok1 := s.In.(*os.File)
	out, ok2 := s.ErrOut.(*os.File)
	return ok1 && ok2 && term.IsTerminal(int(in.Fd())) && term.IsTerminal(int(out.Fd()))
}
