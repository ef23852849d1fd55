package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/pkg/version"
)

func newVersionCommand(s Streams) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print hwk's version, commit, Go version and platform",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := version.Get()
			return out.print(s.Out, v, func() {
				fmt.Fprintf(s.Out, "hwk %s\ncommit:   %s\ngo:       %s\nplatform: %s\n",
					v.Version, v.Commit, v.GoVersion, v.Platform)
			})
		},
	}
	out.register(cmd, "text", "text", "json")
	return cmd
}
