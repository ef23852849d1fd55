package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/internal/imagedist"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// dockerClient connects to the Docker engine once, on first use.
func dockerClient() func() (client.APIClient, error) {
	return sync.OnceValues(func() (client.APIClient, error) {
		c, err := client.New(client.FromEnv)
		if err != nil {
			return nil, err
		}
		// An engine that accepts but does not answer (Docker Desktop
		// starting) must not hold the command.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Ping(ctx, client.PingOptions{}); err != nil {
			return nil, fmt.Errorf("cannot reach the Docker engine: %w", err)
		}
		return c, nil
	})
}

// hostFormats are the formats of node images for os that the drivers
// usable on this host boot from: what a pull fetches when not told.
func (g *globals) hostFormats(ctx context.Context, os config.OS) ([]nodeimage.Format, []string) {
	var out []nodeimage.Format
	var why []string
	for _, a := range g.availability(ctx) {
		f, ok := nodeimage.FormatFor(a.Name)
		if !ok || !slices.Contains(a.GuestOSes, os) {
			continue
		}
		if !a.Available {
			why = append(why, fmt.Sprintf("%s (%s): %s", a.Name, f, a.Detail))
			continue
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b nodeimage.Format) int {
		return slices.Index(nodeimage.Formats, a) - slices.Index(nodeimage.Formats, b)
	})
	return out, why
}

// transferStep runs fn as one step whose line shows each transfer's
// bytes, rate and time left.
func transferStep(st *ui.Status, s Streams, name string, fn func(imagedist.Progress) error) error {
	return st.Step(name, func() error {
		t := ui.NewTransfers(st, s.ErrOut)
		defer t.Stop()
		return fn(t.Update)
	})
}

func windowsReminder(w io.Writer, m *nodeimage.Manifest) {
	if m.OS == string(config.Windows) {
		fmt.Fprintln(w, "Reminder: "+imagedist.WindowsLicence)
	}
}

func formatsFlag(cmd *cobra.Command, p *string, what string) {
	cmd.Flags().StringVar(p, "formats", "", what+" (comma-separated: docker, tar, qcow2, vhdx, vdi)")
}

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
	fs, err := packFormats(ctx, m, formats, docker)
	if err != nil {
		return nil, err
	}
	windowsReminder(s.ErrOut, m)
	return imagedist.Pack(ctx, m, imagedist.PackOptions{CacheDir: cache, Formats: fs, Docker: docker, Step: st.Step})
}

// packFormats is the --formats of push and save: the ones named, or every
// format the image has (the docker format only when the engine holds it).
func packFormats(ctx context.Context, m *nodeimage.Manifest, flag string, docker func() (client.APIClient, error)) ([]nodeimage.Format, error) {
	if flag != "" {
		fs, err := nodeimage.ParseFormats(flag)
		if err != nil {
			return nil, fmt.Errorf("--formats: %w", err)
		}
		for _, f := range fs {
			if !m.Has(ctx, f, docker) {
				where := "in the cache"
				if f == nodeimage.FormatDocker {
					where = "in the Docker engine"
				}
				return nil, fmt.Errorf("--formats: node image %s's %s format is not %s; rebuild it (%s)", m.Name, f, where, rebuildHint(m, f))
			}
		}
		return fs, nil
	}
	var out []nodeimage.Format
	for _, f := range nodeimage.Formats {
		if m.Has(ctx, f, docker) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("node image %s has none of its formats any more (%s)", m.Name, rebuildHint(m, ""))
	}
	return out, nil
}

func rebuildHint(m *nodeimage.Manifest, f nodeimage.Format) string {
	if m.OS == string(config.Windows) {
		return "hwk node-image build windows --iso PATH"
	}
	cmd := "hwk node-image build linux --source " + string(m.Source) + " --kubernetes-version " + m.KubernetesVersion
	if f != "" {
		cmd += " --formats " + string(f)
	}
	return cmd
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

// pinnedRef is what a pull argument names: a version (or nothing) means
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
