package cmd

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/internal/nodeimage/imagedist"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

func newNodeImageLoadCommand(g *globals, s Streams) *cobra.Command {
	var in, formats string
	cmd := &cobra.Command{
		Use:   "load -i FILE",
		Short: "Load node images from an archive 'hwk node-image save' wrote; no network needed",
		Long: `Load the node images in FILE (an OCI image layout in a tar, what 'hwk
node-image save' writes) into the cache: by default the formats of the drivers
usable here, or those named with --formats. Every blob is checked against its
digest; nothing enters the cache unless it is whole.`,
		Example: `  hwk node-image load -i hwk-node-v1.35.4.tar
  hwk node-image load -i node.tar --formats qcow2`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if in == "" {
				return errors.New("name the archive to read with -i FILE")
			}
			var want []nodeimage.Format
			if formats != "" {
				var err error
				if want, err = nodeimage.ParseFormats(formats); err != nil {
					return fmt.Errorf("--formats: %w", err)
				}
			}
			a, err := imagedist.OpenArchive(c.Context(), in)
			if err != nil {
				return err
			}
			ims, err := a.Images(c.Context())
			if err != nil {
				return err
			}
			st := g.newStatus(s)
			for _, im := range ims {
				fs := want
				if len(fs) == 0 {
					host, why := g.hostFormats(c.Context(), config.OS(im.Manifest.OS))
					for _, f := range host {
						if slices.Contains(im.Formats(), f) {
							fs = append(fs, f)
						}
					}
					if len(fs) == 0 {
						return fmt.Errorf("%s: none of its formats (%s) is one a driver usable here boots; name them with --formats\n  %s",
							im.Ref, nodeimage.JoinFormats(im.Formats()), strings.Join(why, "\n  "))
					}
				}
				windowsReminder(s.ErrOut, im.Manifest)
				if err := unpackImage(c.Context(), g, s, st, im, fs, "hwk node-image load"); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&in, "input", "i", "", "the archive to read")
	formatsFlag(cmd, &formats, "formats to load (default: those of the drivers usable here that the archive has)")
	return cmd
}
