package cmd

import (
	"github.com/spf13/cobra"
)

func newConfigCommand(g *globals, s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with cluster config files",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newConfigValidateCommand(g, s))
	return cmd
}
