package cmd

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/doctor"
	"github.com/hwk-dev/hwk/internal/nodeimage/imagedist"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
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
			if err := out.check(); err != nil {
				return err
			}
			// The text report starts at once, its header before the
			// drivers' checks that the config's defaults wait for, and
			// goes on a line per check as each is made; JSON and YAML
			// are printed once, whole.
			reg := g.registry()
			var emit func(doctor.Check)
			if out.format == "text" {
				emit = doctorLines(s.Out, reg.Names())
			}
			cfg, err := flags.resolve(c, g)
			if err != nil {
				return err
			}
			p := g.provider(s, "")
			in := doctor.Input{
				Probes:  doctor.HostProbes(),
				Drivers: g.availability,
				Cluster: cfg,
				NodeDriver: func(n config.Node) (drivers.Driver, error) {
					return reg.Get(n.Driver)
				},
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
			checks := doctor.Run(c.Context(), in, emit)
			if out.format != "text" {
				if err := out.print(s.Out, checks, nil); err != nil {
					return err
				}
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

// doctorLines prints the header, then returns the printer of each check's
// line (and its fix), in columns wide enough for every check's name.
func doctorLines(w io.Writer, driverNames []string) func(doctor.Check) {
	width := len("virtualization")
	for _, n := range driverNames {
		width = max(width, len("driver "+n))
	}
	width += 2
	const status = 8
	fmt.Fprintf(w, "%-*s%-*s%s\n", width, "CHECK", status, "STATUS", "DETAIL")
	return func(ch doctor.Check) {
		fmt.Fprintf(w, "%-*s%-*s%s\n", width, ch.Name, status, ch.Status, ch.Detail)
		if ch.Fix != "" && (ch.Status == doctor.Warn || ch.Status == doctor.Fail) {
			fmt.Fprintf(w, "%s  fix: %s\n", strings.Repeat(" ", width+status), ch.Fix)
		}
	}
}
