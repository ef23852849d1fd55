package cmd

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/pkg/cluster"
)

func newGetNodesCommand(g *globals, s Streams) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "nodes [--name NAME]",
		Short: "List a cluster's nodes: each machine's state and its Kubernetes readiness",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			nodes, err := g.provider(s, "").Nodes(c.Context(), g.name)
			if err != nil {
				return err
			}
			return out.print(s.Out, nodes, func() { printNodes(s, nodes) })
		},
	}
	out.register(cmd, "text", "text", "json", "yaml")
	return cmd
}

func printNodes(s Streams, nodes []cluster.NodeInfo) {
	tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tOS\tDRIVER\tIP\tMACHINE\tKUBERNETES\tVERSION")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.Role, n.OS, n.Driver, n.IP, n.Machine, n.Kubernetes, orDash(n.Version))
	}
	tw.Flush()
}
