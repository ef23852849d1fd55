package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/internal/nodeimage/imagedist"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

func newNodeImageSaveCommand(g *globals, s Streams) *cobra.Command {
	var out, formats string
	cmd := &cobra.Command{
		Use:   "save -o FILE [NAME|VERSION]",
		Short: "Save a cached node image to one OCI layout archive, for machines without a registry",
		Long: `Save a node image from the cache to FILE, an OCI image layout in a tar: the
same index and blobs 'hwk node-image push' sends to a registry. 'hwk
node-image load -i FILE' reads it on another machine with no network and no
registry; so do oras and skopeo. The image is the one named, or the newest
Linux image of a Kubernetes version (default ` + config.DefaultKubernetesVersion + `).`,
		Example: `  hwk node-image save -o hwk-node-v1.35.4.tar
  hwk node-image save -o node.tar v1.35.4 --formats docker,qcow2`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("name the archive to write with -o FILE")
			}
			what := ""
			if len(args) == 1 {
				what = args[0]
			}
			st := g.newStatus(s)
			p, err := packCached(c.Context(), s, st, what, formats)
			if err != nil {
				return err
			}
			defer p.Close()
			m := p.Manifest
			err = transferStep(st, s, "Writing "+out, func(prog imagedist.Progress) error {
				return imagedist.Save(c.Context(), out, m.KubernetesVersion, p, prog)
			})
			if err != nil {
				return err
			}
			if !g.quiet {
				fmt.Fprintf(s.Out, "Saved %s (%s) to %s\n", m.Name, packedSizes(p), out)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the archive to write")
	formatsFlag(cmd, &formats, "formats to save (default: every format the image has)")
	return cmd
}
