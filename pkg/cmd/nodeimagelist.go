package cmd

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

func newNodeImageListCommand(s Streams) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the node images in the cache: versions, source, formats and sizes",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			list, err := nodeimage.List(state.DefaultDirs().Cache)
			if err != nil {
				return err
			}
			public := make([]*nodeimage.Manifest, 0, len(list))
			for _, m := range list {
				public = append(public, m.Public())
			}
			return out.print(s.Out, public, func() {
				if len(list) == 0 {
					fmt.Fprintln(s.Out, "No node images yet; build one with: hwk node-image build linux")
					return
				}
				tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tOS\tKUBERNETES\tSOURCE\tFORMATS\tSIZE\tBUILT\tCOMPONENTS")
				for _, m := range list {
					var fs []string
					for _, f := range nodeimage.Formats {
						if _, ok := m.Artifacts[f]; ok {
							fs = append(fs, string(f))
						}
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Label(), m.KubernetesVersion, m.Source,
						strings.Join(fs, ","), ui.Size(m.Size()), m.Built.Local().Format("2006-01-02 15:04"), components(m))
				}
				tw.Flush()
			})
		},
	}
	out.register(cmd, "text", "text", "json", "yaml")
	return cmd
}

func components(m *nodeimage.Manifest) string {
	var s []string
	if m.Windows != nil {
		// The build and revision the node runs: what its container
		// images must suit, and its patch level.
		s = append(s, "windows "+m.Windows.BuildString())
	}
	for _, c := range []string{"containerd", "runc", "etcd", "coredns", "calico"} {
		if v, ok := m.Components[c]; ok {
			s = append(s, c+" "+v)
		}
	}
	return strings.Join(s, ", ")
}
