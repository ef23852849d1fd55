package cmd

import "github.com/spf13/cobra"

func newConfigValidateCommand(g *globals, s Streams) *cobra.Command {
	var (
		flags clusterFlags
		out   outputFlag
	)
	cmd := &cobra.Command{
		Use:   "validate [--config FILE] [flags]",
		Short: "Check a cluster config and print it with every default filled in",
		Long: `Loads a cluster config the way 'hwk up' does: the file, then the flags given,
then built-in defaults for everything still unset. Prints the effective config
and exits 0, or prints every problem found, each with its field path, and
exits 1. Without --config it shows the default cluster.`,
		Example: `  hwk config validate --config cluster.yaml
  hwk config validate --windows-workers 2 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := flags.resolve(cmd, g)
			if err != nil {
				return err
			}
			if g.quiet {
				return nil
			}
			return out.print(s.Out, c, nil)
		},
	}
	flags.register(cmd)
	out.register(cmd, "yaml", "yaml", "json")
	return cmd
}
