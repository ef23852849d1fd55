package cmd

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newStatusCommand(g *globals, s Streams) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "status [--name NAME]",
		Short: "Show whether a cluster is healthy: API server, nodes, system pods",
		Long: `Show a cluster's health: whether its API server answers, each node's machine
and Kubernetes state, and how many pods of Calico, kube-proxy and CoreDNS
are Ready. Exits 0 when everything is healthy, 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			st, err := g.provider(s, "").Status(c.Context(), g.name)
			if err != nil {
				return err
			}
			err = out.print(s.Out, st, func() {
				api := "ready"
				if !st.APIReady {
					api = "not answering: " + st.APIError
				}
				fmt.Fprintf(s.Out, "Cluster %s (context %s)\nAPI server %s: %s\n\n", st.Name, st.Context, orDash(st.APIServer), api)
				printNodes(s, st.Nodes)
				if len(st.Components) > 0 {
					fmt.Fprintln(s.Out)
					tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "COMPONENT\tREADY")
					for _, ci := range st.Components {
						fmt.Fprintf(tw, "%s\t%d/%d\n", ci.Name, ci.Ready, ci.Want)
					}
					tw.Flush()
				}
			})
			if err != nil {
				return err
			}
			if !st.Healthy {
				return fmt.Errorf("cluster %s is not healthy", st.Name)
			}
			return nil
		},
	}
	out.register(cmd, "text", "text", "json", "yaml")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
