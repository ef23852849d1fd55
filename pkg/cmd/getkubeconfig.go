package cmd

import (
	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
)

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
