package cmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/internal/nodeimage/imagedist"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

func newNodeImagePushCommand(g *globals, s Streams) *cobra.Command {
	var image, formats string
	cmd := &cobra.Command{
		Use:   "push REF",
		Short: "Push a cached node image to a registry as one OCI image index",
		Long: `Push a node image from the cache to a registry, under REF (which names a
tag): an OCI image index holding the docker format as an ordinary container
image (so 'docker pull REF' works) and every other format as an artifact,
disks zstd-compressed. Blobs the registry has already are not sent again.
Credentials come from Docker's config ('docker login').

The pushed reference with its digest is printed on standard output.`,
		Example: `  hwk node-image push ghcr.io/my-org/hwk-node:v1.35.4
  hwk node-image push registry.example.com/hwk/node:v1.35.4 --formats docker,vhdx`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ref := args[0]
			if _, err := imagedist.ParseRef(ref); err != nil {
				return err
			}
			st := g.newStatus(s)
			p, err := packCached(c.Context(), s, st, image, formats)
			if err != nil {
				return err
			}
			defer p.Close()
			m := p.Manifest
			reg := &imagedist.Registry{}
			var dg string
			err = transferStep(st, s, "Pushing to "+ref, func(prog imagedist.Progress) error {
				d, err := reg.Push(c.Context(), ref, p, prog)
				dg = d.String()
				return err
			})
			if err != nil {
				return err
			}
			if !g.quiet {
				fmt.Fprintf(s.ErrOut, "Pushed %s (%s)\n", m.Name, packedSizes(p))
			}
			fmt.Fprintf(s.Out, "%s@%s\n", ref, dg)
			return nil
		},
	}
	cmd.Flags().StringVar(&image, "image", "", "the cached image: a name from 'hwk node-image list', or a Kubernetes version for its newest Linux image (default "+config.DefaultKubernetesVersion+")")
	formatsFlag(cmd, &formats, "formats to push (default: every format the image has)")
	return cmd
}

// packCached packs the cached image a push or save is about (a name, or
// a version's newest Linux image) in the formats the flag names (default:
// all it has), each format a step of st.
func packCached(ctx context.Context, s Streams, st *ui.Status, what, formats string) (*imagedist.Packed, error) {
	cache := state.DefaultDirs().Cache
	list, err := nodeimage.List(cache)
	if err != nil {
		return nil, err
	}
	m, err := nodeimage.Select(list, what, string(config.Linux), config.DefaultKubernetesVersion)
	if err != nil {
		return nil, err
	}
	docker := dockerClient()
	fs, err := imagedist.PackFormats(ctx, m, formats, docker)
	if err != nil && formats != "" {
		return nil, fmt.Errorf("--formats: %w", err)
	} else if err != nil {
		return nil, err
	}
	windowsReminder(s.ErrOut, m)
	return imagedist.Pack(ctx, m, imagedist.PackOptions{CacheDir: cache, Formats: fs, Docker: docker, Step: st.Step})
}

func packedSizes(p *imagedist.Packed) string {
	var s []string
	for _, f := range nodeimage.Formats {
		if n, ok := p.Sizes[f]; ok {
			s = append(s, fmt.Sprintf("%s %s", f, ui.Size(n)))
		}
	}
	return strings.Join(s, ", ")
}
