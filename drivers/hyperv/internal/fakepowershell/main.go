// Command fakepowershell stands in for powershell.exe in tests of the
// Hyper-V driver: placed first on PATH, it is started by the driver's real
// session code and speaks the session's protocol (a setup line, then one
// base64 request per line, each answered with a framed JSON reply). It
// answers from the rules and the real-format replies of pstranscript, and
// keeps a record the test reads: every start and its arguments, every
// script, and every script or line it did not expect, which it answers
// with an error record so that hwk fails too.
//
// Its files are in $HWK_FAKE_POWERSHELL_DIR: rules.json (a
// pstranscript.Transcript, whose state is kept there across processes),
// starts.log, scripts.log and unexpected.log. The replies are read from
// $HWK_FAKE_POWERSHELL_REPLIES. One process runs at a time, as one hwk
// command starts one.
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/hwk-dev/hwk/drivers/hyperv"
	"github.com/hwk-dev/hwk/drivers/hyperv/internal/pstranscript"
)

// The arguments the driver starts PowerShell with, and its first line.
var (
	wantArgs  = []string{"-NoLogo", "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-Command", "-"}
	setupLine = "[Console]::OutputEncoding = [Text.UTF8Encoding]::new($false)"
	request   = regexp.MustCompile(`^& \(\[ScriptBlock\]::Create\(\[Text\.Encoding\]::UTF8\.GetString\(\[Convert\]::FromBase64String\('([A-Za-z0-9+/=]*)'\)\)\)\)$`)
)

func main() {
	dir := os.Getenv("HWK_FAKE_POWERSHELL_DIR")
	replyDir := os.Getenv("HWK_FAKE_POWERSHELL_REPLIES")
	if dir == "" || replyDir == "" {
		fmt.Fprintln(os.Stderr, "fakepowershell: set HWK_FAKE_POWERSHELL_DIR and HWK_FAKE_POWERSHELL_REPLIES")
		os.Exit(2)
	}
	f := &fake{dir: dir}
	f.appendTo("starts.log", strings.Join(os.Args[1:], " "))
	if strings.Join(os.Args[1:], " ") != strings.Join(wantArgs, " ") {
		f.unexpected("started with arguments %q, want %q", os.Args[1:], wantArgs)
	}
	replies, err := pstranscript.LoadReplies(replyDir)
	if err != nil {
		f.unexpected("%v", err)
		os.Exit(1)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	first := true
	for in.Scan() {
		line := in.Text()
		if first {
			first = false
			if line != setupLine {
				f.unexpected("first line %q, want the session's setup %q", line, setupLine)
			}
			continue
		}
		m := request.FindStringSubmatch(line)
		if m == nil {
			f.unexpected("a line that is not a request: %.200q", line)
			continue
		}
		wrapped, err := base64.StdEncoding.DecodeString(m[1])
		script, ok := unwrap(string(wrapped))
		if err != nil || !ok {
			f.unexpected("a request that is not a wrapped script: %.300q", wrapped)
			f.reply(out, `{"ok":false,"error":{"message":"not a wrapped script","category":"ParserError"}}`)
			continue
		}
		result, exit := f.answer(script, replies)
		if exit {
			crash(out)
		}
		f.reply(out, result)
	}
}

// crash is a process dying in the middle of a reply: half a result line,
// then exit.
func crash(out *bufio.Writer) {
	fmt.Fprint(out, "<<hwk-result>>{\"ok\":tr")
	_ = out.Flush()
	os.Exit(1)
}

// unwrap is the script a request wraps, if it is exactly hyperv.Wrap's.
func unwrap(wrapped string) (string, bool) {
	const open, end = "$hwkOut = & {\n", "\n    }\n    '<<hwk-result>>'"
	i := strings.Index(wrapped, open)
	j := strings.Index(wrapped, end)
	if i < 0 || j < i {
		return "", false
	}
	script := wrapped[i+len(open) : j]
	return script, hyperv.Wrap(script) == wrapped
}

type fake struct{ dir string }

// answer finds the rule for script in the shared transcript and returns
// the result line's JSON, or exit when the rule ends the process.
func (f *fake) answer(script string, replies pstranscript.Replies) (result string, exit bool) {
	path := filepath.Join(f.dir, "rules.json")
	var tr pstranscript.Transcript
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &tr)
	}
	if err != nil {
		f.unexpected("read the rules: %v", err)
		return errorReply("the fake PowerShell has no rules"), false
	}
	r, ok := tr.Answer(script)
	if data, err := json.MarshalIndent(tr, "", "  "); err == nil {
		_ = os.WriteFile(path, data, 0o644)
	}
	if !ok {
		f.appendTo("scripts.log", "# --- unexpected\n"+script)
		f.unexpected("a script no rule expects (state %v):\n%s", tr.State, script)
		return errorReply("the fake powershell.exe did not expect this script"), false
	}
	f.appendTo("scripts.log", "# --- "+r.Name+"\n"+script)
	if r.Stderr != "" {
		fmt.Fprintln(os.Stderr, r.Stderr)
	}
	if r.Exit {
		return "", true
	}
	if r.Error != nil {
		b, _ := json.Marshal(r.Error)
		return `{"ok":false,"error":` + string(b) + `}`, false
	}
	raw := []byte("null")
	if r.Reply != "" {
		if raw, err = replies.Get(r.Reply); err != nil {
			f.unexpected("rule %s: %v", r.Name, err)
			return errorReply(err.Error()), false
		}
	}
	// The reply's text goes out as it is in the file, escapes and all.
	return `{"ok":true,"out":` + string(raw) + `}`, false
}

func errorReply(msg string) string {
	b, _ := json.Marshal(pstranscript.PSError{Message: msg, ID: "HwkFakeUnexpected", Category: "NotImplemented", Exception: "System.NotImplementedException"})
	return `{"ok":false,"error":` + string(b) + `}`
}

// reply writes a framed reply, lines ended as Windows ends them.
func (f *fake) reply(out *bufio.Writer, result string) {
	fmt.Fprintf(out, "<<hwk-result>>%s\r\n<<hwk-end>>\r\n", result)
	if err := out.Flush(); err != nil {
		os.Exit(1)
	}
}

func (f *fake) unexpected(format string, args ...any) {
	f.appendTo("unexpected.log", "# ---\n"+fmt.Sprintf(format, args...))
}

func (f *fake) appendTo(name, text string) {
	file, err := os.OpenFile(filepath.Join(f.dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakepowershell:", err)
		os.Exit(1)
	}
	defer file.Close()
	fmt.Fprintln(file, text)
}
