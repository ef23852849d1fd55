package cmd

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/internal/load"
	"github.com/hwk-dev/hwk/internal/ui"
)

func newLoadImageCommand(g *globals, s Streams) *cobra.Command {
	var (
		archives []string
		nodes    []string
		out      outputFlag
	)
	cmd := &cobra.Command{
		Use:   "load-image [IMAGE...] [--archive FILE...] [--name CLUSTER] [--nodes N1,N2]",
		Short: "Put local container images onto the cluster's nodes that can run them",
		Long: `Load images from the local Docker engine, or from archive files, into the
containerd of the cluster's nodes, where pods with imagePullPolicy: Never or
IfNotPresent find them.

Each image goes to the nodes that can run it: Linux images to Linux nodes,
Windows images to Windows nodes whose Windows build runs them (a 2022 node
runs only ltsc2022 images; a 2025 node ltsc2022 and ltsc2025 ones). Of a
multi-platform image each node gets only its own platform. A node that holds
the image already is skipped, or only given the missing name. Every image
is read and matched to the nodes before any node is changed, so an image no
node can run, a missing image or a corrupt archive loads nothing.

--archive takes what 'docker save' writes (either layout) or an OCI image
layout in a tar, plain or gzip-compressed; it needs no Docker engine.`,
		Example: `  docker build -t my/app:dev . && hwk load-image my/app:dev
  hwk load-image my/app:dev my/worker:dev --name ci --nodes hwk-worker-1
  hwk load-image --archive app.tar`,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 && len(archives) == 0 {
				return fmt.Errorf("name the images to load, or archives with --archive\n  e.g. `hwk load-image my/app:dev` or `hwk load-image --archive app.tar`")
			}
			p := g.provider(s, "")
			prog := ui.NewTransfers(p.Progress, s.ErrOut)
			prog.Approximate = true
			var res *load.Result
			what := plural(len(args)+len(archives), "image")
			if len(archives) > 0 && len(args) == 0 {
				what = plural(len(archives), "archive")
			}
			err := p.Progress.Step(fmt.Sprintf("Loading %s into cluster %q", what, g.name), func() error {
				defer prog.Stop()
				var err error
				res, err = load.Load(c.Context(), p.NodeHandles(g.name), load.Options{
					Images:   args,
					Archives: archives,
					Nodes:    nodes,
					Progress: prog.Update,
				})
				return err
			})
			if res != nil {
				if perr := out.print(s.Out, res, func() { printLoadResult(s.Out, res) }); perr != nil {
					return perr
				}
			}
			if err != nil && !g.quiet {
				return &shownError{err: err, summary: "hwk load-image failed (details above)"}
			}
			return err
		},
	}
	cmd.Flags().StringSliceVar(&archives, "archive", nil, "image archive file to load (docker save or OCI layout tar); repeatable")
	cmd.Flags().StringSliceVar(&nodes, "nodes", nil, "load only into these nodes (comma-separated names, see `hwk get nodes`)")
	out.register(cmd, "text", "text", "json", "yaml")
	_ = cmd.MarkFlagFilename("archive", "tar", "tar.gz", "tgz")
	return cmd
}

// printLoadResult writes one line per image: what happened on each node.
func printLoadResult(w io.Writer, res *load.Result) {
	for _, im := range res.Images {
		var parts []string
		var present, skipped []string
		for _, n := range im.Nodes {
			switch n.Outcome {
			case load.Loaded:
				parts = append(parts, fmt.Sprintf("loaded to %s in %s (%s%s)", n.Node, ui.FormatDuration(n.Took), rate(n.Bytes, n.Took), layers(n)))
			case load.Tagged:
				parts = append(parts, fmt.Sprintf("tagged on %s (it held the image under another name)", n.Node))
			case load.Present:
				present = append(present, n.Node)
			case load.Skipped:
				skipped = append(skipped, fmt.Sprintf("%s (%s)", n.Node, n.Reason))
			case load.Failed:
				parts = append(parts, fmt.Sprintf("FAILED on %s", n.Node))
			}
		}
		if len(present) > 0 {
			parts = append(parts, "already present on "+strings.Join(present, ", "))
		}
		if len(skipped) > 0 {
			parts = append(parts, "not for "+strings.Join(skipped, ", "))
		}
		fmt.Fprintf(w, "%s: %s\n", strings.Join(im.Names, ", "), strings.Join(parts, "; "))
	}
}

// layers returns what of the image went and what the node had, when it had
// some.
func layers(n load.NodeResult) string {
	if n.LayersReused == 0 {
		return ""
	}
	sent := "layers"
	if n.LayersSent == 1 {
		sent = "layer"
	}
	return fmt.Sprintf("; %d %s sent, %d reused", n.LayersSent, sent, n.LayersReused)
}

func rate(bytes int64, took time.Duration) string {
	if took <= 0 {
		return ui.Size(bytes)
	}
	return fmt.Sprintf("%s, %s/s", ui.Size(bytes), ui.Size(int64(float64(bytes)/took.Seconds())))
}
