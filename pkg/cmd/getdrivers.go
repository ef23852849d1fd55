package cmd

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

func newGetDriversCommand(g *globals, s Streams) *cobra.Command {
	var out outputFlag
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "drivers",
		Short: "List the drivers in this build, whether each works on this host, and the default per node OS",
		Long: `List the drivers built into hwk. For each: the node operating systems it
can host, whether it is usable on this host right now (and if not, why and
the command that fixes it), and which driver hwk picks for Linux and for
Windows nodes when the config names none. An experimental driver is never
picked; its known limits are shown.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(c.Context(), timeout)
			defer cancel()
			av := g.registry().Check(ctx, runtime.GOOS)
			return out.print(s.Out, av, func() {
				tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tNODE OS\tAVAILABLE\tDEFAULT FOR\tDETAIL")
				for _, a := range av {
					ok := "no"
					if a.Available {
						ok = "yes"
					}
					def := join(a.DefaultFor)
					if def == "" {
						def = "-"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Name, join(a.GuestOSes), ok, def, a.Detail)
					if a.Fix != "" {
						fmt.Fprintf(tw, "\t\t\t\tfix: %s\n", a.Fix)
					}
					if a.Experimental {
						fmt.Fprintf(tw, "\t\t\t\texperimental, used only when named: %s\n", a.Limits)
					}
				}
				tw.Flush()
			})
		},
	}
	out.register(cmd, "text", "text", "json", "yaml")
	cmd.Flags().DurationVar(&timeout, "timeout", drivers.PreflightTimeout, "how long to wait for the drivers' daemons and hypervisors to answer")
	return cmd
}

func join(oses []config.OS) string {
	s := make([]string, len(oses))
	for i, o := range oses {
		s[i] = string(o)
	}
	return strings.Join(s, ",")
}
