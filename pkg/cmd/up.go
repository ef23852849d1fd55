package cmd

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/cluster"
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
