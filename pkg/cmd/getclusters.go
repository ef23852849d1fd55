package cmd

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newGetClustersCommand(g *globals, s Streams) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "clusters",
		Short: "List the clusters on this machine",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			list, err := g.provider(s, "").List()
			if err != nil {
				return err
			}
			return out.print(s.Out, list, func() {
				if len(list) == 0 {
					fmt.Fprintln(s.ErrOut, "No clusters; `hwk up` makes one.")
					return
				}
				tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tKUBERNETES\tNODES\tCONTEXT")
				for _, c := range list {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", c.Name, orDash(c.KubernetesVersion), c.Nodes, c.Context)
				}
				tw.Flush()
			})
		},
	}
	out.register(cmd, "text", "text", "json", "yaml")
	return cmd
}
