package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
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
