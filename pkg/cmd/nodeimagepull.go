package cmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/internal/nodeimage/imagedist"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

func newNodeImagePullCommand(g *globals, s Streams) *cobra.Command {
	var formats, reg string
	cmd := &cobra.Command{
		Use:   "pull [REF|VERSION]",
		Short: "Pull a node image into the cache, only the formats this host's drivers use",
		Long: `Pull a node image from a registry into the cache. With a Kubernetes version (or
nothing: ` + config.DefaultKubernetesVersion + `), the Linux node image this hwk build pins for it, by
digest; with a reference, that image (a team's own registry, a Windows image
pushed there).

Only the formats asked for are downloaded: by default those of the drivers
usable here (see 'hwk get drivers'). Downloads resume where an earlier pull
stopped, are checked against their digests before anything enters the
cache, and unpack as they arrive. Credentials come from Docker's config.`,
		Example: `  hwk node-image pull                               # the pinned image for ` + config.DefaultKubernetesVersion + `
  hwk node-image pull v1.34.4 --formats qcow2
  hwk node-image pull v1.35.4 --registry registry.example.com/mirror
  hwk node-image pull registry.example.com/hwk/windows-node:2022-v1.35.4 --formats vhdx`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ref := ""
			if len(args) == 1 {
				ref = args[0]
			}
			if reg != "" {
				if err := imagedist.CheckRegistry(reg); err != nil {
					return fmt.Errorf("--registry: %w", err)
				}
			}
			var want []nodeimage.Format
			if formats != "" {
				var err error
				if want, err = nodeimage.ParseFormats(formats); err != nil {
					return fmt.Errorf("--formats: %w", err)
				}
			}
			ref, err := pinnedRef(ref, reg)
			if err != nil {
				return err
			}
			st := g.newStatus(s)
			r := &imagedist.Registry{}
			var im *imagedist.Image
			if err := st.Step("Resolving "+ref, func() error {
				var err error
				im, err = r.Resolve(c.Context(), ref)
				return err
			}); err != nil {
				return &shownError{err: err, summary: "hwk node-image pull failed (details above)"}
			}
			if len(want) == 0 {
				var why []string
				want, why = g.hostFormats(c.Context(), config.OS(im.Manifest.OS))
				if len(want) == 0 {
					return fmt.Errorf("no driver usable here boots %s node images, so there is no format to pull; name them with --formats (it has %s)\n  %s",
						im.Manifest.OS, nodeimage.JoinFormats(im.Formats()), strings.Join(why, "\n  "))
				}
			}
			windowsReminder(s.ErrOut, im.Manifest)
			return unpackImage(c.Context(), g, s, st, im, want, "hwk node-image pull")
		},
	}
	formatsFlag(cmd, &formats, "formats to pull (default: those of the drivers usable here)")
	cmd.Flags().StringVar(&reg, "registry", "", "pull a pinned version from this registry (a mirror that keeps digests), e.g. registry.example.com/hwk-dev")
	return cmd
}

// pinnedRef returns what a pull argument names: a version (or nothing) means
// this build's pin for it, from reg when set; anything else is a
// reference.
func pinnedRef(arg, reg string) (string, error) {
	if arg == "" {
		arg = config.DefaultKubernetesVersion
	}
	if !strings.HasPrefix(arg, "v") || strings.ContainsAny(arg, "/:@") {
		if reg != "" {
			return "", fmt.Errorf("--registry applies to a pinned version, not to a reference (%s)", arg)
		}
		return arg, nil
	}
	pins, err := imagedist.Published()
	if err != nil {
		return "", err
	}
	ref, err := pins.Ref(arg, reg)
	var np *imagedist.NotPublishedError
	if errors.As(err, &np) {
		return "", fmt.Errorf("%w\n  fix: pull a reference instead (`hwk node-image pull REGISTRY/REPO:TAG`), load an archive (`hwk node-image load -i FILE`), or build it (`hwk node-image build linux --kubernetes-version %s`)", err, arg)
	}
	return ref, err
}

// unpackImage pulls or loads im's formats want into the cache, as one
// step with per-format progress, and prints what the cache now has.
func unpackImage(ctx context.Context, g *globals, s Streams, st *ui.Status, im *imagedist.Image, want []nodeimage.Format, cmdName string) error {
	for _, f := range want {
		if !slices.Contains(im.Formats(), f) {
			return fmt.Errorf("%s has no %s format (it has %s)", im.Ref, f, nodeimage.JoinFormats(im.Formats()))
		}
	}
	start := time.Now()
	var m *nodeimage.Manifest
	err := transferStep(st, s, fmt.Sprintf("Unpacking %s of %s", nodeimage.JoinFormats(want), im.Manifest.Name), func(prog imagedist.Progress) error {
		var err error
		m, err = im.Unpack(ctx, imagedist.UnpackOptions{CacheDir: state.DefaultDirs().Cache, Formats: want, Docker: dockerClient(), Progress: prog})
		return err
	})
	if err != nil {
		if g.quiet {
			return err
		}
		return &shownError{err: err, summary: cmdName + " failed (details above)"}
	}
	if !g.quiet {
		fmt.Fprintf(s.Out, "Node image %s ready in %s (from %s)\n", m.Name, ui.FormatDuration(time.Since(start)), im.Ref)
		printArtifacts(s.Out, m)
	}
	return nil
}
