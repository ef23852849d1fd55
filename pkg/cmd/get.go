package cmd

import (
	"github.com/spf13/cobra"
)

func newGetCommand(g *globals, s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Show drivers, clusters and nodes",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newGetDriversCommand(g, s), newGetClustersCommand(g, s), newGetNodesCommand(g, s), newGetKubeconfigCommand(g, s))
	return cmd
}
