// Package cmd is hwk's command line: cobra commands that parse flags, call
// into the library packages and print. Logic lives elsewhere.
package cmd

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/drivers/all"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/ui"
)

// Streams are where a command reads and writes.
type Streams struct {
	In          io.Reader
	Out, ErrOut io.Writer
}

// StdStreams are the process's own.
func StdStreams() Streams {
	return Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
}

// globals are the flags every command has.
type globals struct {
	verbosity int
	quiet     bool
	name      string
	logger    *slog.Logger
	// registry makes the driver registry; tests replace it.
	registry func() *drivers.Registry
}

// NewRootCommand builds the hwk command tree.
func NewRootCommand(s Streams) *cobra.Command {
	return newRootCommand(s, all.Registry)
}

func newRootCommand(s Streams, registry func() *drivers.Registry) *cobra.Command {
	g := &globals{logger: ui.NewLogger(s.ErrOut, 0), registry: registry}
	root := &cobra.Command{
		Use:   "hwk",
		Short: "Hybrid Linux + Windows Kubernetes clusters on one workstation",
		Long: `hwk makes a Kubernetes cluster with a Linux control plane and Windows Server
workers on your own machine, each node on a driver of your choice (Hyper-V,
VirtualBox, libvirt, WSL2, docker), with Calico networking for both.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if g.verbosity < 0 {
				return fmt.Errorf("--verbosity %d is negative; use 0 (default) to 3", g.verbosity)
			}
			g.logger = ui.NewLogger(s.ErrOut, g.verbosity)
			return nil
		},
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.ErrOut)

	pf := root.PersistentFlags()
	pf.IntVarP(&g.verbosity, "verbosity", "v", 0, "log detail: 0 warnings, 1 info, 2 debug, 3 debug with source lines")
	pf.BoolVarP(&g.quiet, "quiet", "q", false, "print only errors and the data a command was asked for")
	pf.StringVar(&g.name, "name", config.DefaultName, "cluster name")

	root.AddCommand(
		newVersionCommand(s),
		newConfigCommand(g, s),
		newGetCommand(g, s),
		newNodeImageCommand(g, s),
	)
	return root
}

// Main runs hwk with args and returns the process exit code.
func Main(args []string, s Streams) int {
	root := NewRootCommand(s)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		printError(s.ErrOut, err)
		return 1
	}
	return 0
}

// printError prints a failed command's error. A config's problems get one
// line each, compiler style (file:line: field: message), so every one of
// them can be fixed in a single pass.
func printError(w io.Writer, err error) {
	var fe *fileErrors
	if errors.As(err, &fe) {
		fmt.Fprintf(w, "ERROR: %s has %s:\n", fe.file, plural(len(fe.errs), "problem"))
		for _, e := range fe.errs {
			fmt.Fprintf(w, "  %s\n", fe.format(e))
		}
		return
	}
	fmt.Fprintf(w, "ERROR: %v\n", err)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
