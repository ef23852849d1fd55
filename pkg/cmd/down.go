package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newDownCommand(g *globals, s Streams) *cobra.Command {
	var kubecfg string
	cmd := &cobra.Command{
		Use:   "down [--name NAME]",
		Short: "Delete a cluster and everything hwk made for it",
		Long: `Delete a cluster: its nodes (workers first), its node network, its
kubeconfig context and its directory under hwk's data directory. It works on
a cluster whose 'up' failed or was interrupted. Deleting a cluster that is
not there is not an error.`,
		Example: `  hwk down
  hwk down --name ci`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			p := g.provider(s, kubecfg)
			var found bool
			err := p.Progress.Step(fmt.Sprintf("Deleting cluster %q", g.name), func() error {
				var err error
				found, err = p.Down(c.Context(), g.name)
				return err
			})
			if err != nil {
				return fmt.Errorf("delete cluster %s: %w", g.name, err)
			}
			if !found && !g.quiet {
				fmt.Fprintf(s.Out, "There was no cluster named %q.\n", g.name)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&kubecfg, "kubeconfig", "", "kubeconfig file to remove the cluster from (default: $KUBECONFIG, else ~/.kube/config)")
	return cmd
}
