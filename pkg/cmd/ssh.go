package cmd

import "github.com/spf13/cobra"

func newSSHCommand(g *globals, s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "ssh NODE [--name NAME]",
		Short: "Open a shell on a node",
		Long: `Open a login shell on one of a cluster's nodes: bash on Linux nodes,
PowerShell on Windows nodes, through docker exec, SSH or wsl.exe as 'hwk exec' does.
With stdin a terminal the shell is interactive; otherwise it reads commands
from stdin.`,
		Example: `  hwk ssh hwk-cp
  hwk ssh hwk-win-1 --name ci`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, args []string) error {
			return runOnNode(c, g, s, args[0], nil)
		},
	}
}
