package virtualbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/console"
	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Runner runs VBoxManage with args and returns what it wrote to stdout. A
// failure is an *Error. Every operation of the driver is a VBoxManage call.
type Runner interface {
	// Why VBoxManage, as minikube and Vagrant drive VirtualBox too: it is
	// the interface VirtualBox documents and keeps compatible, and its
	// --machinereadable output is meant for this.
	Run(ctx context.Context, args ...string) (string, error)
}

// CallTimeout bounds one VBoxManage call. Every call hwk makes is quick
// (making a differencing disk, not copying one); a hung VBoxSVC is the
// usual reason for one to take longer.
var CallTimeout = 2 * time.Minute

// retryWait and retries govern the calls retried because VirtualBox was
// busy with the same machine a moment before ("The object is not ready",
// a session lock being released): minikube's vbm.go retries these too.
var (
	retryWait = time.Second
	retries   = 5
)

// callMu runs one VBoxManage at a time in this process: VBoxSVC does not
// take concurrent changes to its registry (machines, media) well, and
// hwk's nodes are made concurrently.
var callMu sync.Mutex

// CLI runs the VBoxManage program of this host.
type CLI struct {
	mu   sync.Mutex
	path string
}

// errNotFound marks a host without VBoxManage.
var errNotFound = errors.New("VBoxManage not found")

// find locates VBoxManage once it is there: a search that found nothing
// is made again next time (VirtualBox may have been installed since).
func (c *CLI) find() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" {
		p, err := Find(os.Getenv, exec.LookPath, installDir)
		if err != nil {
			return "", err
		}
		c.path = p
	}
	return c.path, nil
}

// Run implements Runner.
func (c *CLI) Run(ctx context.Context, args ...string) (string, error) {
	path, err := c.find()
	if err != nil {
		return "", err
	}
	for attempt := 1; ; attempt++ {
		out, err := c.call(ctx, path, args)
		var ve *Error
		if err == nil || !errors.As(err, &ve) || !ve.busy() || attempt == retries {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, err
		case <-time.After(retryWait):
		}
	}
}

func (c *CLI) call(parent context.Context, path string, args []string) (string, error) {
	callMu.Lock()
	defer callMu.Unlock()
	ctx, cancel := context.WithTimeout(parent, CallTimeout)
	defer cancel()
	cmd := hostexec.Command(ctx, path, args...)
	console.Hide(cmd)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil && ctx.Err() != nil {
		// Why: killed, it exits 1 on Windows (TerminateProcess), which
		// parseError would take for VBoxManage's own failure.
		if parent.Err() != nil {
			return "", fmt.Errorf("VBoxManage %s: %w", summary(args), parent.Err())
		}
		return "", fmt.Errorf("VBoxManage %s did not answer within %s (is VBoxSVC hung? see VirtualBox's VBoxSVC.log): %w", summary(args), CallTimeout, ctx.Err())
	}
	// Why: to a pipe, VBoxManage writes in the ANSI code page
	// (IPRT's r3/stream.cpp, RTStrUtf8ToCurrentCP), so a path under a
	// user's non-ASCII name would match none of hwk's.
	out := hostexec.FromANSI(stdout.Bytes())
	if ve := parseError(args, hostexec.FromANSI(stderr.Bytes()), err); ve != nil {
		return out, ve
	}
	return out, nil
}

// Error is VBoxManage failing: it exited non-zero, or wrote an error line
// to stderr, which it does for some failures while exiting 0.
type Error struct {
	Args []string
	// Messages are its "VBoxManage: error:" lines, without that prefix,
	// other than the Details and Context lines.
	Messages []string
	// Code is the result code its Details line names
	// ("VBOX_E_OBJECT_NOT_FOUND"), "" when it printed none.
	Code string
	// Exit is its exit status (1 failure, 2 a syntax error).
	Exit int
	// Stderr is the end of what it wrote to stderr when it printed no
	// error line.
	Stderr string
}

func (e *Error) Error() string {
	msg := strings.Join(e.Messages, ": ")
	if msg == "" {
		msg = strings.TrimSpace(e.Stderr)
	}
	if msg == "" {
		msg = fmt.Sprintf("exit status %d", e.Exit)
	}
	return fmt.Sprintf("VBoxManage %s: %s", summary(e.Args), msg)
}

// busy reports whether e is the failure of a machine or medium in use a
// moment ago, which goes away when retried.
func (e *Error) busy() bool {
	for _, m := range e.Messages {
		if strings.Contains(m, "The object is not ready") || strings.Contains(m, "is already locked for a session (or being unlocked)") {
			return true
		}
	}
	return false
}

// IsNotFound reports whether err is VBoxManage reporting that the machine,
// medium or network asked for does not exist.
func IsNotFound(err error) bool {
	var ve *Error
	if !errors.As(err, &ve) {
		return false
	}
	return ve.Code == "VBOX_E_OBJECT_NOT_FOUND" || ve.Code == "NS_ERROR_FILE_NOT_FOUND" || ve.Code == "VBOX_E_FILE_ERROR" && strings.Contains(strings.Join(ve.Messages, " "), "VERR_FILE_NOT_FOUND")
}

// summary returns the subcommand of args and the first argument that is not
// an option, for messages: "showvminfo demo-cp", "createvm demo-cp".
func summary(args []string) string {
	if len(args) == 0 {
		return ""
	}
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			return args[0] + " " + a
		}
	}
	return args[0]
}

// errLineRE is an error line: RTMsgError prefixes each with the
// program's name, which is VBoxManage.exe on Windows.
var errLineRE = regexp.MustCompile(`^VBoxManage(?:\.exe)?: error: (.*)$`)

var detailsRE = regexp.MustCompile(`^Details: code ([A-Z0-9_]+) \(0x[0-9a-fA-F]+\)`)

// parseError reads VBoxManage's stderr for the lines errorprint.cpp
// writes (GluePrintErrorInfo, GluePrintErrorContext): "VBoxManage: error:"
// then the message, then "Details: code VBOX_E_... (0x...)", then
// "Context: ...". It is nil for a call that succeeded.
func parseError(args []string, stderr string, runErr error) *Error {
	e := &Error{Args: args}
	for _, line := range strings.Split(stderr, "\n") {
		line = strings.TrimRight(line, "\r")
		m := errLineRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rest := strings.TrimSpace(m[1])
		switch {
		case detailsRE.MatchString(rest):
			e.Code = detailsRE.FindStringSubmatch(rest)[1]
		// An error line of only a rule, or of nothing, tells nothing: kept,
		// it would make an empty message.
		case strings.HasPrefix(rest, "Context: "), strings.Trim(rest, "-") == "":
		default:
			e.Messages = append(e.Messages, rest)
		}
	}
	var ee *exec.ExitError
	switch {
	case errors.As(runErr, &ee):
		e.Exit = ee.ExitCode()
	case runErr != nil:
		return &Error{Args: args, Messages: []string{runErr.Error()}, Exit: -1}
	case len(e.Messages) == 0 && e.Code == "":
		return nil
	}
	if len(e.Messages) == 0 {
		e.Stderr = hostexec.Clip(stderr, 400)
	}
	return e
}

// exeName returns VBoxManage's file name on this OS.
func exeName() string {
	if runtime.GOOS == "windows" {
		return "VBoxManage.exe"
	}
	return "VBoxManage"
}

// defaultDirs returns where VirtualBox's installers put VBoxManage when it is
// not on PATH.
func defaultDirs() []string {
	switch runtime.GOOS {
	case "windows":
		return []string{`C:\Program Files\Oracle\VirtualBox`}
	case "darwin":
		return []string{"/Applications/VirtualBox.app/Contents/MacOS"}
	}
	return nil
}

// Find locates VBoxManage: in the directories VirtualBox's Windows
// installer names in VBOX_MSI_INSTALL_PATH and VBOX_INSTALL_PATH (a list,
// as older installers wrote it), then its install directory as the
// registry records it (Windows), then on PATH, then where the installers
// put it by default.
func Find(getenv func(string) string, lookPath func(string) (string, error), registryDir func() string) (string, error) {
	var dirs []string
	for _, v := range []string{"VBOX_MSI_INSTALL_PATH", "VBOX_INSTALL_PATH"} {
		for _, d := range filepath.SplitList(getenv(v)) {
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	if d := registryDir(); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if p := filepath.Join(d, exeName()); isFile(p) {
			return p, nil
		}
	}
	if p, err := lookPath(exeName()); err == nil {
		return p, nil
	}
	for _, d := range defaultDirs() {
		if p := filepath.Join(d, exeName()); isFile(p) {
			return p, nil
		}
	}
	return "", errNotFound
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// run runs VBoxManage; a host without it is the driver unavailable.
func (d *Driver) run(ctx context.Context, args ...string) (string, error) {
	out, err := d.vbm.Run(ctx, args...)
	if errors.Is(err, errNotFound) {
		return "", notInstalled()
	}
	return out, err
}

func notInstalled() error {
	return &drivers.UnavailableError{Driver: config.DriverVirtualBox, Reason: "VBoxManage was not found (VBOX_MSI_INSTALL_PATH, the registry, PATH): VirtualBox is not installed",
		Fix: "install VirtualBox 7.0 or newer from https://www.virtualbox.org/wiki/Downloads (on Windows: `winget install Oracle.VirtualBox`)"}
}
