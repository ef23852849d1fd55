package cmd

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/cluster"
)

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
