package cmd

import (
	"github.com/spf13/cobra"
)

func newExportCommand(g *globals, s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export a cluster's logs",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newExportLogsCommand(g, s))
	return cmd
}
