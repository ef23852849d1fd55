package cmd

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/pkg/cluster"
	"github.com/hwk-dev/hwk/pkg/doctor"
	"github.com/hwk-dev/hwk/pkg/imagedist"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
	"github.com/hwk-dev/hwk/pkg/state"
)

func newDoctorCommand(g *globals, s Streams) *cobra.Command {
	var (
		flags clusterFlags
		out   outputFlag
	)
	cmd := &cobra.Command{
		Use:   "doctor [--config FILE] [flags]",
		Short: "Check this host for what hwk needs, with the fix for each problem",
		Long: `Check this host: hardware virtualization, every driver, on Windows whether
VirtualBox and the Windows hypervisor get in each other's way, memory and
disk for the nodes of the cluster 'hwk up' would make (the config and flags
as for up), the Docker engine's mode and clock, the node subnet up would
take, and ports other local Kubernetes distributions hold. Each problem
comes with its fix. Exits 1 when a check fails (a warning does not).`,
		Example: `  hwk doctor
  hwk doctor --windows-workers 0 --driver docker
  hwk doctor --config cluster.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := flags.resolve(c, g)
			if err != nil {
				return err
			}
			p := g.provider(s, "")
			in := doctor.Input{
				Probes:  doctor.HostProbes(),
				Drivers: g.availability(c.Context()),
				Cluster: cfg,
				DataDir: state.DefaultDirs().Data,
				Source:  flags.source(),
			}
			// A cluster that exists is checked as it was made: its nodes,
			// its drivers, its subnet; the flags that shape a new one do
			// not apply to it.
			rec, err := p.Config(cfg.Name)
			var missing *cluster.NotFoundError
			switch {
			case err == nil:
				if shaping := flags.given(c); len(shaping) > 0 {
					g.logger.Warn(fmt.Sprintf("cluster %s exists, so doctor checks it as recorded and ignores %s", cfg.Name, strings.Join(shaping, ", ")))
				}
				in.Cluster, in.Existing = rec, true
				in.Subnet, in.SubnetErr = netip.ParsePrefix(rec.Networking.NodeSubnet)
			case errors.As(err, &missing):
				in.Subnet, in.SubnetErr = p.ProbeSubnet(c.Context(), cfg)
			default:
				return err
			}
			in.WindowsImageHelp = cluster.WindowsImageHelp
			cached, err := nodeimage.List(state.DefaultDirs().Cache)
			if err != nil {
				return err
			}
			for _, m := range cached {
				in.Images = append(in.Images, m.OS+" "+m.KubernetesVersion)
			}
			pins, err := imagedist.Published()
			if err == nil {
				_, err = pins.Ref(cfg.KubernetesVersion, cfg.Images.Registry)
			}
			in.NoLinuxPull = err
			checks := doctor.Run(c.Context(), in)
			err = out.print(s.Out, checks, func() {
				tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL")
				for _, ch := range checks {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", ch.Name, ch.Status, ch.Detail)
					if ch.Fix != "" && (ch.Status == doctor.Warn || ch.Status == doctor.Fail) {
						fmt.Fprintf(tw, "\t\t  fix: %s\n", ch.Fix)
					}
				}
				tw.Flush()
			})
			if err != nil {
				return err
			}
			if doctor.Failed(checks) {
				return fmt.Errorf("some checks failed; each says how to fix it")
			}
			return nil
		},
	}
	flags.register(cmd)
	out.register(cmd, "text", "text", "json")
	return cmd
}
