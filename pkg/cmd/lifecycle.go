package cmd

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/cluster"
)

func newStopCommand(g *globals, s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "stop [--name NAME]",
		Short: "Shut a cluster's machines down, keeping everything for 'hwk start'",
		Long: `Shut a cluster's machines down: the workers first, then the control plane.
Nothing is deleted: node addresses, disks, certificates and the kubeconfig
context stay, and 'hwk start' brings the cluster back. A stopped cluster
stays stopped when the host or the Docker engine restarts; a running one
comes back by itself on the docker driver.`,
		Example: `  hwk stop
  hwk stop --name ci && hwk start --name ci`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := g.provider(s, "").Stop(c.Context(), g.name); err != nil {
				return showStepError(g, "stop", err)
			}
			if !g.quiet {
				fmt.Fprintf(s.Out, "Cluster %q is stopped; `hwk start --name %s` starts it again.\n", g.name, g.name)
			}
			return nil
		},
	}
}

func newStartCommand(g *globals, s Streams) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "start [--name NAME]",
		Short: "Start a stopped cluster and wait until it is Ready",
		Long: `Start a cluster 'hwk stop' stopped (or one whose machines stopped with the
host): the control plane first, then, once its API server answers, the
workers. It waits until every node's kubelet has reported Ready since the
start and Calico, kube-proxy and CoreDNS are Ready. Addresses, certificates
and the kubeconfig context are those of 'hwk up'.`,
		Example: `  hwk start
  hwk start --name ci --wait 10m`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			res, err := g.provider(s, "").Start(c.Context(), g.name, cluster.Timeouts{NodesReady: wait})
			if err != nil {
				return showStepError(g, "start", err)
			}
			if !g.quiet {
				fmt.Fprintf(s.Out, "Cluster %q is running: API server after %s, all nodes Ready after %s.\n",
					g.name, ui.FormatDuration(res.APIReady), ui.FormatDuration(res.NodesReady))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "how long to wait for every node to be Ready (default "+cluster.DefaultTimeouts.NodesReady.String()+")")
	return cmd
}

// showStepError keeps a failed step's details, which its step line has
// shown already, from being printed twice.
func showStepError(g *globals, verb string, err error) error {
	var step *cluster.StepError
	if g.quiet || !errors.As(err, &step) {
		return err
	}
	return &shownError{err: err, summary: fmt.Sprintf("hwk %s stopped at %q (details above)", verb, step.Step)}
}
