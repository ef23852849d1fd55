// Package node is the handle through which hwk runs things on a node: a
// command or a script with streams and an exit status, a stream copied to a
// path. The handle speaks the node's shell dialect (POSIX sh on Linux,
// PowerShell on Windows); a Transport (docker exec, SSH, wsl.exe) only moves
// argv and bytes.
package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"

	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/internal/powershell"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Shell is the command dialect a node speaks.
type Shell int

const (
	// POSIX is /bin/sh on Linux nodes.
	POSIX Shell = iota
	// PowerShell is Windows PowerShell 5.1 on Windows nodes; it is on every
	// Windows Server image, where pwsh is not.
	PowerShell
)

func (s Shell) String() string {
	if s == PowerShell {
		return "powershell"
	}
	return "sh"
}

// ShellFor returns the dialect of a node running os.
func ShellFor(os config.OS) Shell {
	if os == config.Windows {
		return PowerShell
	}
	return POSIX
}

// Cmd is one program to run on a node. Nil streams mean no input and
// discarded output.
type Cmd struct {
	Args   []string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// TTY runs the command on a terminal of that size, for a person at
	// one (hwk ssh, hwk exec): its output and errors then arrive mixed,
	// on Stdout.
	TTY *TermSize
}

// TermSize is a terminal's size in characters.
type TermSize struct {
	Rows, Cols uint16
}

// Transport runs argv on a machine and reports how it ended. A command that
// ran and exited non-zero is an *ExitError; any other error means the
// transport itself failed. The node handle always passes non-nil Stdout and
// Stderr.
type Transport interface {
	Run(ctx context.Context, cmd Cmd) error
}

// ExitError is a command that ran on a node and exited non-zero.
type ExitError struct {
	Node string
	Args []string
	Code int
	// Stderr holds the end of what the command wrote to stderr, for the
	// message (on a Windows node the error records' messages, decoded from
	// PowerShell's CLIXML: powershell.ErrorText); the caller's own Stderr
	// writer still got all of it (as text: powershell.NewCLIXMLWriter).
	Stderr string
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("%s on node %s exited with status %d", summarize(e.Args), e.Node, e.Code)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += ": " + hostexec.LastLines(s, 3)
	}
	return msg
}

// Node is a handle on one machine of a cluster.
type Node struct {
	name  string
	os    config.OS
	shell Shell
	t     Transport
}

// New makes a handle for the node name running os, reached through t.
func New(name string, os config.OS, t Transport) *Node {
	return &Node{name: name, os: os, shell: ShellFor(os), t: t}
}

// Name returns the node's name.
func (n *Node) Name() string { return n.name }

// OS returns the node's operating system.
func (n *Node) OS() config.OS { return n.os }

// Shell returns the dialect RunScript speaks on this node.
func (n *Node) Shell() Shell { return n.shell }

// Run runs cmd on the node. A non-zero exit is an *ExitError carrying the
// end of stderr, whether or not the caller also collects stderr.
func (n *Node) Run(ctx context.Context, cmd Cmd) error {
	if len(cmd.Args) == 0 {
		return errors.New("run on node " + n.name + ": no command")
	}
	if cmd.Stdout == nil {
		cmd.Stdout = io.Discard
	}
	// Windows PowerShell's stderr is CLIXML, several times the text it
	// carries, and decoded for the message.
	size := 4096
	if n.shell == PowerShell {
		size = 16 << 10
	}
	tail := hostexec.NewTail(size)
	switch {
	case cmd.Stderr == nil:
		cmd.Stderr = tail
	case n.shell == PowerShell:
		dec := powershell.NewCLIXMLWriter(cmd.Stderr)
		defer dec.Close()
		cmd.Stderr = io.MultiWriter(dec, tail)
	default:
		cmd.Stderr = io.MultiWriter(cmd.Stderr, tail)
	}
	var in *inputReader
	if cmd.Stdin != nil {
		in = &inputReader{r: cmd.Stdin}
		cmd.Stdin = in
	}
	err := n.t.Run(ctx, cmd)
	// A transport ends a command's input at EOF and at a read error alike,
	// so a command fed a broken stream can exit 0 on half its input; the
	// read error is recorded before that EOF, so it is seen here.
	if rerr := in.Err(); rerr != nil {
		return fmt.Errorf("run %s on node %s: read input: %w", summarize(cmd.Args), n.name, rerr)
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		ee.Node, ee.Args, ee.Stderr = n.name, cmd.Args, tail.String()
		if n.shell == PowerShell {
			ee.Stderr = powershell.ErrorText(ee.Stderr)
		}
		return ee
	}
	if err != nil {
		return fmt.Errorf("run %s on node %s: %w", summarize(cmd.Args), n.name, err)
	}
	return nil
}

// Connector is a Transport that can open its connection ahead of any
// command, which for SSH proves the node is the one whose host key hwk
// pinned.
type Connector interface {
	Connect(ctx context.Context) error
}

// Connect opens the transport's connection now if it has one to open
// (Connector), and is a no-op otherwise.
func (n *Node) Connect(ctx context.Context) error {
	c, ok := n.t.(Connector)
	if !ok {
		return nil
	}
	if err := c.Connect(ctx); err != nil {
		return fmt.Errorf("connect to node %s: %w", n.name, err)
	}
	return nil
}

// Output runs args and returns what they wrote to stdout.
func (n *Node) Output(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	err := n.Run(ctx, Cmd{Args: args, Stdout: &out})
	return out.String(), err
}

// RunScript runs script in the node's shell (see Shell). The script's stdin
// is cmd's Stdin, so a script can consume a stream.
func (n *Node) RunScript(ctx context.Context, script string, streams Cmd) error {
	streams.Args = ScriptArgs(n.shell, script)
	return n.Run(ctx, streams)
}

// ScriptArgs returns the argv that runs script in shell. PowerShell gets the
// script encoded (internal/powershell), so no quoting layer between us and it
// (SSH, cmd.exe) can mangle it.
func ScriptArgs(shell Shell, script string) []string {
	if shell == PowerShell {
		return append([]string{"powershell.exe"}, powershell.Args(script)...)
	}
	return []string{"/bin/sh", "-c", script}
}

// ScriptOf returns the script an argv from ScriptArgs runs (for fakes and
// tests that see only the argv); ok is false for any other argv.
func ScriptOf(args []string) (script string, ok bool) {
	switch {
	case len(args) == 3 && args[0] == "/bin/sh" && args[1] == "-c":
		return args[2], true
	case len(args) > 1 && args[0] == "powershell.exe":
		return powershell.Script(args[1:])
	}
	return "", false
}

// CopyTo writes everything read from r to path on the node with mode
// (ignored on Windows), replacing any file there; a failed copy never
// leaves a truncated file under path. A Windows node's transport must be
// a FileWriter.
func (n *Node) CopyTo(ctx context.Context, r io.Reader, path string, mode fs.FileMode) error {
	if n.shell == PowerShell {
		// Why: the transport itself writes the file (SFTP), keeping the
		// bytes out of PowerShell: a Windows node's login shell is
		// PowerShell, and whether Windows PowerShell passes a redirected
		// stdin to a script's [Console]::OpenStandardInput() untouched is
		// not something hwk can rely on (issue 26): a YAML file might
		// survive re-encoding, an image archive would not.
		return n.writeFile(ctx, r, path, mode)
	}
	// copyScript writes to a temporary file beside path first, so a failed
	// copy leaves no truncated file under the real name.
	if err := n.RunScript(ctx, copyScript(path, mode), Cmd{Stdin: r}); err != nil {
		return fmt.Errorf("copy to %s: %w", path, err)
	}
	return nil
}

func (n *Node) writeFile(ctx context.Context, r io.Reader, path string, mode fs.FileMode) error {
	fw, ok := n.t.(FileWriter)
	if !ok {
		return fmt.Errorf("copy to %s on node %s: its transport (%T) cannot write files; hwk copies files to Windows nodes over SFTP only", path, n.name, n.t)
	}
	p, err := SFTPPath(path)
	if err != nil {
		return fmt.Errorf("copy to %s on node %s: %w", path, n.name, err)
	}
	in := &inputReader{r: r}
	err = fw.WriteFile(ctx, in, p, mode)
	if rerr := in.Err(); rerr != nil {
		return fmt.Errorf("copy to %s on node %s: read input: %w", path, n.name, rerr)
	}
	if err != nil {
		return fmt.Errorf("copy to %s on node %s: %w", path, n.name, err)
	}
	return nil
}

// copyScript writes its standard input to path, in POSIX sh.
func copyScript(path string, mode fs.FileMode) string {
	return fmt.Sprintf(`set -e
dst=%s
tmp="$dst.hwk-tmp.$$"
mkdir -p "$(dirname "$dst")"
trap 'rm -f "$tmp"' EXIT
cat > "$tmp"
chmod %04o "$tmp"
mv -f "$tmp" "$dst"
trap - EXIT
`, quoteWord(POSIX, path), mode.Perm())
}

// Quote renders args as one command line for shell, each argument a single
// literal word. SSH carries a command line, not argv, so this is how argv
// survives the trip.
func Quote(shell Shell, args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = quoteWord(shell, a)
	}
	if shell == PowerShell && len(q) > 0 {
		// A quoted first word is a string to PowerShell; & makes it a
		// command. sshd's DefaultShell runs the line with -Command, whose
		// status is 0 or 1 unless the line calls exit (PowerShell's
		// ConsoleHost, PowerShell/PowerShell#13501): the exit keeps a
		// program's own status, and a failed cmdlet's 1.
		return "$global:LASTEXITCODE = $null; & " + strings.Join(q, " ") + powerShellExit
	}
	return strings.Join(q, " ")
}

// powerShellExit ends a PowerShell command line with the status of its
// command: a program's exit code when it was one (whatever $? makes of
// what it wrote to stderr), else 1 when the command failed.
const powerShellExit = "; $ok = $?; if ($null -ne $LASTEXITCODE) { exit $LASTEXITCODE }; if (-not $ok) { exit 1 }"

// quoteWord makes s one literal string in shell's syntax.
func quoteWord(shell Shell, s string) string {
	if shell == PowerShell {
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// summarize names a command for messages without dumping a whole script.
func summarize(args []string) string {
	if len(args) == 0 {
		return "command"
	}
	s := strings.Join(args, " ")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) > 80 {
		s = s[:77] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// inputReader remembers the first read error of a command's input.
type inputReader struct {
	r   io.Reader
	mu  sync.Mutex
	err error
}

func (i *inputReader) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	if err != nil && err != io.EOF {
		i.mu.Lock()
		if i.err == nil {
			i.err = err
		}
		i.mu.Unlock()
	}
	return n, err
}

// Err returns the read error, if any; nil on a nil reader.
func (i *inputReader) Err() error {
	if i == nil {
		return nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.err
}
