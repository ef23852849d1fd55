package cmd

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

func newExecCommand(g *globals, s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "exec NODE [--name NAME] -- COMMAND [ARG...]",
		Short: "Run a command on a node",
		Long: `Run a command on one of a cluster's nodes and exit with its status: with
docker exec on container nodes, over SSH (with the host key pinned at the
node's first boot) on VM nodes, through wsl.exe on a WSL2 node. On Windows nodes the command runs under
PowerShell. When stdin is a terminal the command gets one too.`,
		Example: `  hwk exec hwk-cp -- crictl ps
  hwk exec hwk-win-1 -- Get-Service kubelet
  kubectl get pods -o yaml | hwk exec hwk-cp -- sh -c 'cat > /tmp/pods.yaml'`,
		Args: func(c *cobra.Command, args []string) error {
			if c.ArgsLenAtDash() != 1 || len(args) < 2 {
				return errors.New("give a node and, after --, the command: hwk exec NODE -- COMMAND [ARG...]")
			}
			return nil
		},
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, args []string) error {
			return runOnNode(c, g, s, args[0], args[1:])
		},
	}
}

// runOnNode runs args (nil: the node's login shell) on a node, attached to
// the streams, and exits with the command's status.
func runOnNode(c *cobra.Command, g *globals, s Streams, name string, args []string) error {
	h, n, err := g.provider(s, "").Node(c.Context(), g.name, name)
	if err != nil {
		return err
	}
	if args == nil {
		args = []string{"bash", "-l"}
		if n.OS == config.Windows {
			args = []string{"powershell.exe", "-NoLogo"}
		}
	}
	cmd := node.Cmd{Args: args, Stdin: s.In, Stdout: s.Out, Stderr: s.ErrOut}
	if f, ok := s.In.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		cols, rows, err := term.GetSize(int(f.Fd()))
		if err != nil {
			cols, rows = 80, 24
		}
		cmd.TTY = &node.TermSize{Rows: uint16(rows), Cols: uint16(cols)}
		old, err := term.MakeRaw(int(f.Fd()))
		if err != nil {
			return fmt.Errorf("put the terminal in raw mode: %w", err)
		}
		defer term.Restore(int(f.Fd()), old)
	}
	err = h.Run(c.Context(), cmd)
	var ee *node.ExitError
	if errors.As(err, &ee) {
		// The command's own status, as ssh and docker exec give it; what
		// it wrote to stderr the user has seen.
		return &exitStatus{code: ee.Code}
	}
	return err
}

// exitStatus is a command that ran and failed: hwk exits with its status
// and prints nothing more.
type exitStatus struct{ code int }

func (e *exitStatus) Error() string { return fmt.Sprintf("exit status %d", e.code) }
