package node

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// recorder is a transport that records what it was asked to run and
// answers with a fixed exit.
type recorder struct {
	args  []string
	stdin string
	code  int
}

func (r *recorder) Run(_ context.Context, c Cmd) error {
	r.args = c.Args
	if c.Stdin != nil {
		b, err := io.ReadAll(c.Stdin)
		r.stdin = string(b)
		if err != nil {
			return nil // the node handle must notice on its own
		}
	}
	if c.Stderr != nil {
		_, _ = io.WriteString(c.Stderr, "line1\nline2\nline3\nlast words\n")
	}
	if r.code != 0 {
		return &ExitError{Code: r.code}
	}
	return nil
}

func TestQuotePOSIXRoundTrip(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("runs /bin/sh, which a Windows host lacks; POSIX quoting is for Linux nodes")
	}
	args := []string{"printf", "%s|", "it's", `"dq"`, "$HOME", "a b", "", ";rm -rf /", "`x`"}
	out, err := exec.Command("/bin/sh", "-c", Quote(POSIX, args...)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(args[2:], "|") + "|"; string(out) != want {
		t.Errorf("sh saw %q, want %q", out, want)
	}
}

func TestQuotePowerShell(t *testing.T) {
	got := Quote(PowerShell, `C:\Program Files\containerd\ctr.exe`, "it's", "$env:PATH")
	want := `$global:LASTEXITCODE = $null; & 'C:\Program Files\containerd\ctr.exe' 'it''s' '$env:PATH'; $ok = $?; if ($null -ne $LASTEXITCODE) { exit $LASTEXITCODE }; if (-not $ok) { exit 1 }`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestScriptArgs(t *testing.T) {
	if got := ScriptArgs(POSIX, "echo hi"); strings.Join(got, " ") != "/bin/sh -c echo hi" {
		t.Errorf("posix: %q", got)
	}
	script := "Write-Output 'héllo ✓'\n"
	args := ScriptArgs(PowerShell, script)
	if args[0] != "powershell.exe" || args[len(args)-2] != "-EncodedCommand" {
		t.Fatalf("powershell: %q", args)
	}
	raw, err := base64.StdEncoding.DecodeString(args[len(args)-1])
	if err != nil || len(raw)%2 != 0 {
		t.Fatalf("encoding: %v", err)
	}
	u := make([]uint16, len(raw)/2)
	for i := range u {
		u[i] = uint16(raw[2*i]) | uint16(raw[2*i+1])<<8
	}
	if got := string(utf16.Decode(u)); got != script {
		t.Errorf("decoded %q, want %q", got, script)
	}
	// ScriptOf undoes ScriptArgs, and only that.
	for _, shell := range []Shell{POSIX, PowerShell} {
		if got, ok := ScriptOf(ScriptArgs(shell, script)); !ok || got != script {
			t.Errorf("ScriptOf(ScriptArgs(%v)) = %q, %v", shell, got, ok)
		}
	}
	for _, args := range [][]string{{"hostname"}, {"powershell.exe", "-EncodedCommand", "!!"}, {"/bin/sh", "-c"}} {
		if _, ok := ScriptOf(args); ok {
			t.Errorf("ScriptOf(%q) took it for a script", args)
		}
	}
}

func TestShellFollowsOS(t *testing.T) {
	if New("w", config.Windows, &recorder{}).Shell() != PowerShell || New("l", config.Linux, &recorder{}).Shell() != POSIX {
		t.Error("wrong shell for OS")
	}
}

func TestExitErrorCarriesStderrTail(t *testing.T) {
	n := New("hwk-cp", config.Linux, &recorder{code: 2})
	err := n.Run(context.Background(), Cmd{Args: []string{"kubeadm", "init", "--config", "/kind/kubeadm.conf"}})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 2 {
		t.Fatalf("err = %v", err)
	}
	want := `"kubeadm init --config /kind/kubeadm.conf" on node hwk-cp exited with status 2: line2
line3
last words`
	if err.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", err, want)
	}
}

// clixmlFailure is a transport whose command writes stderr and exits code.
type clixmlFailure struct {
	stderr string
	code   int
}

func (f clixmlFailure) Run(_ context.Context, c Cmd) error {
	_, _ = io.WriteString(c.Stderr, f.stderr)
	return &ExitError{Code: f.code}
}

// TestExitErrorDecodesCLIXML checks that a Windows node's script that
// throws fails with the thrown message, not the CLIXML that Windows
// PowerShell writes to a redirected stderr, and that the caller's writer
// (a node's log) gets the record as text.
func TestExitErrorDecodesCLIXML(t *testing.T) {
	b, err := os.ReadFile("../../internal/powershell/testdata/throw.clixml")
	if err != nil {
		t.Fatal(err)
	}
	_, stderr, _ := strings.Cut(string(b), "\n--\n")
	n := New("demo-win-1", config.Windows, clixmlFailure{stderr: stderr, code: 1})
	var raw strings.Builder
	err = n.RunScript(context.Background(), "throw 'x'", Cmd{Stderr: &raw})
	want := `exited with status 1: the service was restarted once
containerd did not start within 60 s; its log (C:\ProgramData\containerd\root\containerd.log) ends with <fatal>
& the service stays Stopped`
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("err = %v, want it to end with\n%s", err, want)
	}
	if got := raw.String(); !strings.HasPrefix(got, "the service was restarted once\r\ncontainerd did not start within 60 s;") || strings.Contains(got, "CLIXML") {
		t.Errorf("the caller's stderr: %q", got)
	}
}

// fileRecorder is a transport that also writes files (as SSH does, over
// SFTP); it runs no command.
type fileRecorder struct {
	path string
	data []byte
	mode fs.FileMode
}

func (*fileRecorder) Run(_ context.Context, c Cmd) error {
	return fmt.Errorf("fileRecorder: no command expected, got %q", c.Args)
}

func (f *fileRecorder) WriteFile(_ context.Context, r io.Reader, p string, mode fs.FileMode) error {
	f.path, f.mode = p, mode
	var err error
	f.data, err = io.ReadAll(r)
	return err
}

// TestCopyToWindowsWritesTheFileOverTheTransport checks that a copy to
// Windows never goes through PowerShell (issue 26): the transport writes
// the file, at its SFTP path.
func TestCopyToWindowsWritesTheFileOverTheTransport(t *testing.T) {
	f := &fileRecorder{}
	n := New("hwk-win-1", config.Windows, f)
	if err := n.CopyTo(context.Background(), strings.NewReader("payload"), `C:\k\it's.txt`, 0o644); err != nil {
		t.Fatal(err)
	}
	if f.path != "/C:/k/it's.txt" || string(f.data) != "payload" || f.mode != 0o644 {
		t.Errorf("wrote %q (%v): %q", f.path, f.mode, f.data)
	}

	// A transport that only runs commands is refused, not used with a
	// script.
	r := &recorder{}
	err := New("hwk-win-1", config.Windows, r).CopyTo(context.Background(), strings.NewReader("x"), `C:\k\x`, 0o600)
	if err == nil || !strings.Contains(err.Error(), "cannot write files") || r.args != nil {
		t.Errorf("command-only transport: err %v, ran %q", err, r.args)
	}
	// A broken input fails the copy however the transport took it.
	err = n.CopyTo(context.Background(), io.MultiReader(strings.NewReader("half"), failing{}), `C:\k\y`, 0o600)
	if err == nil || !strings.Contains(err.Error(), "read input: disk on fire") {
		t.Errorf("broken input: %v", err)
	}
}

func TestSFTPPath(t *testing.T) {
	for in, want := range map[string]string{
		`C:\hwk\kubeadm-join.yaml`: "/C:/hwk/kubeadm-join.yaml",
		`c:/ProgramData/x y`:       "/c:/ProgramData/x y",
		`/var/lib/hwk/f`:           "/var/lib/hwk/f",
	} {
		if got, err := SFTPPath(in); err != nil || got != want {
			t.Errorf("SFTPPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`hwk\x`, `C:x`, `\\server\share\x`, ""} {
		if got, err := SFTPPath(bad); err == nil {
			t.Errorf("SFTPPath(%q) = %q, want an error", bad, got)
		}
	}
}

func TestBrokenInputFailsTheCommand(t *testing.T) {
	n := New("hwk-cp", config.Linux, &recorder{})
	err := n.CopyTo(context.Background(), io.MultiReader(strings.NewReader("half"), failing{}), "/x", 0o600)
	if err == nil || !strings.Contains(err.Error(), "read input: disk on fire") {
		t.Fatalf("err = %v", err)
	}
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }
