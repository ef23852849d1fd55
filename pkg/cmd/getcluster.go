package cmd

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hwk-dev/hwk/pkg/cluster"
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

func newGetKubeconfigCommand(g *globals, s Streams) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "kubeconfig [--name NAME]",
		Short: "Print a cluster's kubeconfig (context hwk-NAME), for KUBECONFIG or another machine",
		Example: `  hwk get kubeconfig > hwk.kubeconfig && KUBECONFIG=hwk.kubeconfig kubectl get nodes
  hwk get kubeconfig -o json`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			data, err := g.provider(s, "").Kubeconfig(g.name)
			if err != nil {
				return err
			}
			if out.format == "yaml" {
				_, err = s.Out.Write(data)
				return err
			}
			cfg, err := clientcmd.Load(data)
			if err != nil {
				return err
			}
			// kubectl's own JSON form of a kubeconfig (v1 Config).
			js, err := clientcmd.Write(*cfg)
			if err != nil {
				return err
			}
			return out.print(s.Out, yamlToAny(js), nil)
		},
	}
	out.register(cmd, "yaml", "yaml", "json")
	return cmd
}
