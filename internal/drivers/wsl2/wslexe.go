package wsl2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/unicode"

	"github.com/hwk-dev/hwk/internal/drivers/console"
	"github.com/hwk-dev/hwk/internal/drivers/winhost"
	"github.com/hwk-dev/hwk/internal/hostexec"
)

// Runner runs wsl.exe with args, stdin (which may be nil) as its input,
// and reports what it wrote and how it exited. Only a failure to run it at
// all is an error.
type Runner interface {
	Run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, args ...string) (exit int, err error)
	// Spawn starts wsl.exe with args and leaves it running, past the end
	// of hwk (the keepalive session).
	Spawn(args ...string) error
}

// CLI runs this host's wsl.exe.
type CLI struct{}

// errNoWSL marks a host without wsl.exe; errInWSL the Linux hwk inside a
// WSL distribution, whose PATH reaches Windows' wsl.exe, which it would
// hand Linux paths.
var (
	errNoWSL = errors.New("wsl.exe not found")
	errInWSL = errors.New("the WSL2 driver is driven by hwk.exe on Windows, and this is the Linux hwk in a WSL distribution")
)

// wslPath returns wsl.exe's path: System32's on Windows (a PATH entry of
// the same name must not stand in for it), else the first on PATH (tests).
func wslPath() (string, error) {
	if runtime.GOOS != "windows" && winhost.InWSL() {
		return "", errInWSL
	}
	if runtime.GOOS == "windows" {
		if root := os.Getenv("SystemRoot"); root != "" {
			if p := filepath.Join(root, "System32", "wsl.exe"); isFile(p) {
				return p, nil
			}
		}
	}
	p, err := exec.LookPath("wsl.exe")
	if err != nil {
		return "", errNoWSL
	}
	return p, nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// Run implements Runner. WSL_UTF8=1 asks wsl.exe for UTF-8 rather than
// UTF-16LE (WslClient.cpp, WslClient::Main); older builds ignore it, so
// replies are decoded either way.
func (CLI) Run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, args ...string) (int, error) {
	p, err := wslPath()
	if err != nil {
		return 0, err
	}
	cmd := command(hostexec.Command(ctx, p, args...))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err = cmd.Run()
	if err != nil && ctx.Err() != nil {
		// Why: killed, it exits 1 on Windows (TerminateProcess), which
		// is not wsl.exe's answer.
		return -1, fmt.Errorf("wsl.exe %s: %w", strings.Join(args[:min(len(args), 2)], " "), ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, err
}

// Spawn implements Runner. The session has no window, no console of
// hwk's and, where the job hwk runs in allows it, no job of hwk's, so
// closing hwk's terminal, Ctrl-C there or the end of an SSH session does
// not end it; it ends with its distribution.
func (CLI) Spawn(args ...string) error {
	p, err := wslPath()
	if err != nil {
		return err
	}
	start := func(detach bool) (*exec.Cmd, error) {
		cmd := command(hostexec.Command(context.Background(), p, args...))
		if detach {
			console.Detach(cmd)
		}
		return cmd, cmd.Start()
	}
	cmd, err := start(true)
	if console.Refused(err) {
		// A job that allows no breakaway: the session then lives as long
		// as the job does.
		cmd, err = start(false)
	}
	if err != nil {
		return fmt.Errorf("start wsl.exe %s: %w", strings.Join(args, " "), err)
	}
	// Reaped if it ends while hwk runs; never waited for.
	go func() { _ = cmd.Wait() }()
	return nil
}

// command readies a wsl.exe command: UTF-8 asked for, no window.
func command(cmd *exec.Cmd) *exec.Cmd {
	cmd.Env = append(os.Environ(), "WSL_UTF8=1")
	console.Hide(cmd)
	return cmd
}

// decode turns wsl.exe's own output into text: UTF-16LE (without a BOM,
// as wsl.exe writes it; one is dropped if there) unless it is UTF-8
// (WSL_UTF8=1; a BOM dropped there too), with CRLF and the inbox
// wsl.exe's CRCRLF made LF.
func decode(b []byte) string {
	b = bytes.TrimPrefix(b, []byte{0xff, 0xfe})
	// UTF-8 text holds no NULs, and UTF-16 of any ASCII does. Output cut
	// short (wsl.exe killed mid-write) still decodes to UTF-8: an odd
	// last byte is half a code unit, and UTF-8 cut in a character keeps
	// a replacement for it.
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if bytes.IndexByte(b, 0) >= 0 || len(b)%2 == 0 && !utf8.Valid(b) {
		s = decodeUTF16LE(b)
	}
	// Every CR before a line end goes, however many: replacing CRCRLF
	// and then CRLF leaves CRLF of a longer run.
	return crsRE.ReplaceAllString(strings.TrimPrefix(s, "\ufeff"), "\n")
}

var crsRE = regexp.MustCompile(`\r+\n`)

// decodeUTF16LE decodes UTF-16LE; x/text's decoder puts U+FFFD for a
// half code unit at the end and for a lone surrogate.
func decodeUTF16LE(b []byte) string {
	text, _ := unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM).NewDecoder().Bytes(b)
	return string(text)
}

// Error is wsl.exe failing: its message (in the user's language) and the
// code on its last line ("Error code: Wsl/Service/WSL_E_DISTRO_NOT_FOUND";
// the label is translated, the code is not).
type Error struct {
	Args    []string
	Message string
	// Code is the error's name, the code's last part
	// ("WSL_E_DISTRO_NOT_FOUND", "ERROR_ALREADY_EXISTS"); Context the
	// whole code.
	Code, Context string
	Exit          int
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = fmt.Sprintf("exit status %d", e.Exit)
	}
	if e.Context != "" {
		msg += " (" + e.Context + ")"
	}
	return fmt.Sprintf("wsl.exe %s: %s", strings.Join(e.Args, " "), msg)
}

// codeRE finds the code of an error at the end of a line: ErrorToString
// (wslutil.cpp) joins the context's flags, Wsl first, and the error's
// name with slashes. Anchored, it finds the code that ends the line
// where an earlier "Wsl/..." in the line (a message quoting one) would
// otherwise be found first, and the code missed.
var codeRE = regexp.MustCompile(`Wsl(?:/[A-Za-z0-9_]+)+$`)

// parseError reads a failed wsl.exe's output: its message lines, then the
// code line.
func parseError(args []string, out string, exit int) *Error {
	e := &Error{Args: args, Exit: exit}
	var msg []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		line = strings.TrimSpace(line)
		if c := codeRE.FindString(line); c != "" {
			e.Context = c
			e.Code = c[strings.LastIndex(c, "/")+1:]
			continue
		}
		if line != "" {
			msg = append(msg, line)
		}
	}
	e.Message = strings.Join(msg, " ")
	return e
}

// isCode reports whether err is wsl.exe failing with the error named code.
func isCode(err error, code string) bool {
	var we *Error
	return errors.As(err, &we) && we.Code == code
}

// manage runs a wsl.exe command of its own (not one in a distribution)
// and returns its output as text, or an *Error.
func manage(ctx context.Context, r Runner, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	exit, err := r.Run(ctx, nil, &stdout, &stderr, args...)
	if err != nil {
		return "", err
	}
	out := decode(stdout.Bytes())
	if exit != 0 {
		return out, parseError(args, out+"\n"+decode(stderr.Bytes()), exit)
	}
	return out, nil
}

// distributions lists the registered distributions' names (`--list
// --quiet`: names only, none is no output and exit 0); with running,
// those running.
func distributions(ctx context.Context, r Runner, running bool) ([]string, error) {
	args := []string{"--list", "--quiet"}
	if running {
		args = []string{"--list", "--running", "--quiet"}
	}
	out, err := manage(ctx, r, args...)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			names = append(names, line)
		}
	}
	return names, nil
}

// versionRE is a WSL version on `--version`'s first line, whose label is
// translated ("WSL version: 2.5.7.0", "WSL-Version: ...", "Version WSL : ...").
var versionRE = regexp.MustCompile(`(\d+)\.(\d+)\.(\d+)(?:\.\d+)?\s*$`)

// versions reads `wsl.exe --version` into f: WSL's version from the first
// line and Windows' build from the last. The inbox wsl.exe, which
// predates WSL's Store package, does not know the option: f.inbox.
func versions(ctx context.Context, r Runner, f *hostFacts) error {
	out, err := manage(ctx, r, "--version")
	var we *Error
	if errors.As(err, &we) && strings.Contains(we.Message, "--version") && we.Context == "" {
		// "Invalid command line option: --version", then usage.
		f.inbox = true
		return nil
	}
	if err != nil {
		return err
	}
	first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	first = strings.TrimSpace(first)
	m := versionRE.FindStringSubmatch(first)
	if m == nil {
		return fmt.Errorf("wsl.exe --version printed no version: %q", first)
	}
	f.major, _ = strconv.Atoi(m[1])
	fields := strings.Fields(first)
	f.version = fields[len(fields)-1]
	f.windowsBuild = parseWindowsBuild(out)
	return nil
}
