package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/internal/nodeimage/imagedist"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

func newNodeImageCommand(g *globals, s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node-image",
		Short: "Build, list, pull, push, save and load the node images clusters are made from",
		Args:  cobra.NoArgs,
	}
	build := &cobra.Command{
		Use:   "build",
		Short: "Build a node image: linux, or windows from your Windows Server ISO",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("name the node OS to build: 'hwk node-image build linux' or 'hwk node-image build windows --iso PATH'")
		},
	}
	build.AddCommand(newNodeImageBuildLinuxCommand(g, s), newNodeImageBuildWindowsCommand(g, s))
	cmd.AddCommand(build, newNodeImageListCommand(s),
		newNodeImagePullCommand(g, s), newNodeImagePushCommand(g, s),
		newNodeImageSaveCommand(g, s), newNodeImageLoadCommand(g, s))
	return cmd
}

func splitFormats(s string) []nodeimage.Format {
	var out []nodeimage.Format
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, nodeimage.Format(f))
		}
	}
	return out
}

// buildOutput returns where a build's commands write: the build log, and with
// -v the terminal too.
func (g *globals) buildOutput(log io.Writer, status *ui.Status, s Streams) io.Writer {
	if g.verbosity > 0 {
		return io.MultiWriter(log, status.Writer(s.ErrOut))
	}
	return log
}

// buildLog opens the file every command of a build writes its output to.
func buildLog(cacheDir string) (*os.File, func(), error) {
	dir := cacheDir + string(os.PathSeparator) + "logs"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	f, err := os.Create(dir + string(os.PathSeparator) + "node-image-build-" + time.Now().Format("20060102-150405") + ".log")
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}

func printArtifacts(w io.Writer, m *nodeimage.Manifest) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range nodeimage.Formats {
		a, ok := m.Artifacts[f]
		if !ok {
			continue
		}
		where := a.DockerImage
		if a.Path != "" {
			where = m.Dir + string(os.PathSeparator) + a.Path
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f, ui.Size(a.Size), where)
	}
	tw.Flush()
}

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

// hostFormats returns the formats of node images for os that the drivers
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
