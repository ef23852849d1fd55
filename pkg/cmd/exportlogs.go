package cmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func newExportLogsCommand(g *globals, s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "logs [DIR] [--name NAME]",
		Short: "Collect a cluster's logs into one archive, for a bug report",
		Long: `Collect a cluster's logs into DIR/hwk-logs-NAME-TIME.tar.gz (DIR defaults to
the current directory).

Per Linux node: the kubelet's and containerd's journals, crictl ps -a and
crictl pods, ip addr and routes, iptables and nftables rules, and every
container's log under /var/log/pods. Per Windows node: the kubelet's and
containerd's logs, Calico's and kube-proxy's container logs, the HNS
networks, endpoints and policy lists, the CNI config, the Hyper-V compute,
Hyper-V worker and HNS event logs, ipconfig /all and route print. From the
API server: nodes, pods and events of every namespace, as YAML. And hwk's
own logs of the cluster's up, with the bootstrap token redacted.

A node that does not answer (stopped, unreachable) is recorded in
summary.txt and the rest is still collected.`,
		Example: `  hwk export logs
  hwk export logs /tmp --name ci`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("export logs: %w", err)
			}
			file, err := g.provider(s, "").ExportLogs(c.Context(), g.name, dir)
			if err != nil {
				return err
			}
			fmt.Fprintln(s.Out, file)
			return nil
		},
	}
}
