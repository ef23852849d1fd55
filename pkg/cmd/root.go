// Package cmd is hwk's command line: cobra commands that parse flags, call
// into the library packages and print. Each command is in the file named
// for it (getnodes.go is `hwk get nodes`); root.go holds the flags every
// command has and the deps tests replace.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/drivers/all"
	"github.com/hwk-dev/hwk/internal/kubeconfig"
	"github.com/hwk-dev/hwk/internal/nodeimage/build"
	"github.com/hwk-dev/hwk/internal/nodeimage/stage2"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// Streams are where a command reads and writes.
type Streams struct {
	In          io.Reader
	Out, ErrOut io.Writer
}

// StdStreams returns the process's own.
func StdStreams() Streams {
	return Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
}

// globals are the flags every command has.
type globals struct {
	verbosity int
	quiet     bool
	name      string
	// force lets drivers that refuse a host they run badly on run there
	// anyway (VirtualBox on the Windows hypervisor), with a warning.
	force  bool
	logger *slog.Logger
	// status is the newest step lines (newStatus), where notes of slow
	// checks go; mu guards it, for the checks run concurrently.
	mu     sync.Mutex
	status *ui.Status
	// checked is what availability found, kept for the rest of the
	// command: preflights can take seconds (Hyper-V starts PowerShell).
	checked []drivers.Availability
	deps
}

// deps are the commands' ways out of the process that tests replace; a
// nil field is the real one.
type deps struct {
	// registry makes the driver registry (all.Registry).
	registry func() *drivers.Registry
	// build makes a Linux node image (build.Build).
	build func(context.Context, nodeimage.Options) (*nodeimage.Manifest, error)
	// terminal reports whether up may ask its user.
	terminal func(Streams) bool
	// releases returns why Kubernetes' release downloads do not answer
	// (nodeimage.ReleasesReachable).
	releases func(ctx context.Context, version string) error
	// configureIn sets where a Linux build's stage 2 runs (stage2.Choose).
	configureIn func(ctx context.Context, opts *nodeimage.Options, where string) error
}

// availability returns every driver's standing here, checked once per command.
func (g *globals) availability(ctx context.Context) []drivers.Availability {
	if g.checked == nil {
		g.checked = g.registry().Check(ctx, runtime.GOOS)
	}
	return g.checked
}

// NewRootCommand builds the hwk command tree.
func NewRootCommand(s Streams) *cobra.Command {
	return newRootCommand(s, deps{})
}

// newRootCommand builds the command tree over d, whose nil fields take
// the real dependencies.
func newRootCommand(s Streams, d deps) *cobra.Command {
	g := &globals{logger: ui.NewLogger(s.ErrOut, 0), deps: d}
	if g.registry == nil {
		g.registry = func() *drivers.Registry {
			return all.Registry(all.Options{Warn: func(m string) { g.logger.Warn(m) }, Force: g.force})
		}
	}
	if g.build == nil {
		g.build = build.Build
	}
	if g.terminal == nil {
		g.terminal = interactive
	}
	if g.releases == nil {
		g.releases = nodeimage.ReleasesReachable
	}
	if g.configureIn == nil {
		g.configureIn = func(ctx context.Context, opts *nodeimage.Options, where string) error {
			// The registry makes fresh drivers on each call: one for this choice.
			return stage2.Choose(ctx, opts, where, g.registry())
		}
	}
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
			// Every command checks the name before it looks at any file:
			// state paths are made from it.
			if err := config.CheckName(g.name); err != nil {
				return fmt.Errorf("--name: %w", err)
			}
			// A check of the host that takes long shows what it waits
			// for, every few seconds, never silence: in the running
			// step's line, or a line of its own.
			if !g.quiet {
				cmd.SetContext(ui.WithNotes(cmd.Context(), func(m string) {
					g.mu.Lock()
					st := g.status
					g.mu.Unlock()
					if st == nil {
						st = ui.NewStatus(s.ErrOut, false)
					}
					st.Note(m)
				}))
			}
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
	pf.BoolVar(&g.force, "force", false, "use the virtualbox driver even where the Windows hypervisor is on (VirtualBox then runs its VMs through it, slowly)")

	root.AddCommand(
		newVersionCommand(s),
		newConfigCommand(g, s),
		newGetCommand(g, s),
		newNodeImageCommand(g, s),
		newUpCommand(g, s),
		newDownCommand(g, s),
		newStopCommand(g, s),
		newStartCommand(g, s),
		newExecCommand(g, s),
		newSSHCommand(g, s),
		newExportCommand(g, s),
		newDoctorCommand(g, s),
		newStatusCommand(g, s),
		newLoadImageCommand(g, s),
	)
	return root
}

// Main runs hwk with args and returns the process exit code.
func Main(args []string, s Streams) int {
	// The first interrupt cancels the command's context, so that a step
	// can stop cleanly and say what it left; a second one kills hwk.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	root := NewRootCommand(s)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		var status *exitStatus
		if errors.As(err, &status) {
			return status.code
		}
		printError(s.ErrOut, err)
		return 1
	}
	return 0
}

// printError prints a failed command's error. A config's problems get one
// line each, compiler style (file:line: field: message), so every one of
// them can be fixed in a single pass.
func printError(w io.Writer, err error) {
	var shown *shownError
	if errors.As(err, &shown) {
		fmt.Fprintf(w, "ERROR: %s\n", shown.summary)
		return
	}
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

// host returns this machine as config defaults see it: its OS, and for each
// node OS the driver hwk would pick among those that work here now.
func (g *globals) host(ctx context.Context) config.Host {
	if ctx == nil {
		ctx = context.Background()
	}
	// Each driver's check has its own limit (drivers.PreflightTimeout),
	// and reports why it gave up: an outer limit would only cut that short.
	h := config.Host{OS: runtime.GOOS, Drivers: map[config.OS]string{}}
	for _, a := range g.availability(ctx) {
		for _, os := range a.DefaultFor {
			h.Drivers[os] = a.Name
		}
	}
	return h
}

// newStatus returns the step lines of a command on stderr; slow checks of
// the host add their notes to the newest one's running step.
func (g *globals) newStatus(s Streams) *ui.Status {
	st := ui.NewStatus(s.ErrOut, g.quiet)
	g.mu.Lock()
	g.status = st
	g.mu.Unlock()
	return st
}

// provider returns the cluster provider every cluster command uses: this
// host's drivers, hwk's directories, and step lines on stderr.
func (g *globals) provider(s Streams, kubeconfigPath string) *cluster.Provider {
	return &cluster.Provider{
		Registry:        g.registry(),
		Dirs:            state.DefaultDirs(),
		KubeconfigPaths: kubeconfig.Paths{Explicit: kubeconfigPath},
		Progress:        g.newStatus(s),
		Log:             g.logger,
		Docker:          dockerClient(),
	}
}

// shownError is an error whose whole text the step lines have already
// printed; the final line only sums it up.
type shownError struct {
	err     error
	summary string
}

func (e *shownError) Error() string { return e.err.Error() }
func (e *shownError) Unwrap() error { return e.err }
