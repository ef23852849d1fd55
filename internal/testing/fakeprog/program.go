package fakeprog

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/internal/powershell"
	"github.com/hwk-dev/hwk/internal/state"
)

// Unwrap is the script a session request wraps, and whether the request
// is exactly what the driver's wrapper makes of it (hyperv.Wrap; this
// package cannot import the driver, whose own tests import it).
type Unwrap func(wrapped string) (script string, ok bool)

// Main is the fake program: it reads its Config from the directory above
// its own,
// answers as the Config's Protocol says, and returns its exit status.
func Main(args []string, unwrap Unwrap) int {
	// The program is DIR/bin/NAME: its directory is beside it, so that
	// two fakes of one test (powershell.exe and wsl.exe) keep apart.
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake %s: %v\n", filepath.Base(os.Args[0]), err)
		return 2
	}
	dir := filepath.Dir(filepath.Dir(exe))
	p := &program{dir: dir}
	if err := readJSON(filepath.Join(dir, configFile), &p.cfg); err != nil {
		p.unexpected(args, err.Error())
		return 2
	}
	if p.cfg.Replies != "" {
		var err error
		if p.replies, err = LoadReplies(p.cfg.Replies); err != nil {
			p.unexpected(args, err.Error())
			return 2
		}
	}
	if p.cfg.Protocol == PowerShellSession {
		return p.session(args, unwrap)
	}
	return p.call(args)
}

type program struct {
	dir     string
	cfg     Config
	replies Replies
}

// call answers one call: its arguments are the request.
func (p *program) call(args []string) int {
	// What the caller writes to stdin is kept beside the call, for the
	// test to read (a nil stdin in Go is /dev/null: nothing). It is read
	// before the lock is taken: a caller that keeps stdin open (a session
	// started on a one-call fake) must not hold up the other calls.
	in, _ := io.ReadAll(os.Stdin)
	unlock, err := p.lock()
	if err != nil {
		return p.refuse(args, err.Error())
	}
	defer unlock()
	n := countLines(p.path(callsFile))
	if len(in) > 0 {
		if err := os.WriteFile(p.path(fmt.Sprintf("stdin.%d", n)), in, 0o644); err != nil {
			return p.refuse(args, err.Error())
		}
	}
	p.appendTo(callsFile, mustJSON(args))
	req := Request{Args: args}
	if script, ok := powershell.Script(args); ok {
		req.Script = script
	}
	e, rep, err := p.answer(req)
	if err != nil {
		return p.refuse(args, err.Error())
	}
	if e.Error != nil {
		// An error record is how a PowerShell session answers; a program
		// called once answers with its output and exit status.
		return p.refuse(args, fmt.Sprintf("%s: an error record (!) answers only a session", e.Where))
	}
	os.Stderr.Write(p.encode(rep, e.Stderr))
	if e.StdoutFile != "" {
		data, err := os.ReadFile(Expand(e.StdoutFile, p.cfg.Vars))
		if err != nil {
			return p.refuse(args, fmt.Sprintf("%s: %v", e.Where, err))
		}
		os.Stdout.Write(data)
	}
	out := p.encode(rep, rep.Stdout)
	if e.Crash {
		// The program dies in the middle of its answer.
		os.Stdout.Write(out[:len(out)/2])
		return 1
	}
	os.Stdout.Write(out)
	os.Stderr.Write(p.encode(rep, rep.Stderr))
	return rep.Exit
}

// answer finds the exchange for req in the shared state and renders its
// reply; it records the request either way.
func (p *program) answer(req Request) (*Exchange, Reply, error) {
	shown := mustJSON(req.Args)
	if req.Script != "" {
		shown = req.Script
	}
	var st State
	if err := readJSON(p.path(stateFile), &st); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, Reply{}, err
	}
	t := p.cfg.Transcript
	if t == nil {
		t = &Transcript{}
	}
	e, ok := t.Answer(&st, req, p.cfg.Vars)
	if !ok {
		p.appendTo(requestsFile, "# --- unexpected\n"+shown)
		what := "call"
		if p.cfg.Protocol == PowerShellSession {
			what = "script"
		}
		return nil, Reply{}, fmt.Errorf("no exchange of the transcript expects this %s (flags: %s)", what, strings.Join(st.Flags, " "))
	}
	if err := os.WriteFile(p.path(stateFile), []byte(mustJSON(st)), 0o644); err != nil {
		return nil, Reply{}, err
	}
	p.appendTo(requestsFile, "# --- "+e.Name+"\n"+shown)
	p.appendTo(answersFile, e.Name)
	rep, err := e.Render(p.replies, &st, p.cfg.Vars)
	return e, rep, err
}

// encode is s as the program writes it for reply r.
func (p *program) encode(r Reply, s string) []byte {
	if p.cfg.ANSI && !r.UTF16 {
		return ToANSI(s)
	}
	return r.Encode(s)
}

// refuse records a call the fake could not answer and answers it as the
// real program answers a failure.
func (p *program) refuse(args []string, why string) int {
	p.unexpected(args, why)
	r := p.cfg.Refusal
	if r == (Reply{}) {
		r = Reply{Stderr: "fake " + p.cfg.Program + ": {why}\n", Exit: 1}
	}
	os.Stdout.Write(p.encode(r, strings.ReplaceAll(r.Stdout, "{why}", why)))
	os.Stderr.Write(p.encode(r, strings.ReplaceAll(r.Stderr, "{why}", why)))
	return r.Exit
}

func (p *program) unexpected(args []string, why string) {
	what := mustJSON(args)
	if script, ok := powershell.Script(args); ok {
		what += " (the script:\n" + script + "\n)"
	}
	p.appendTo(unexpectedFile, what+": "+why)
}

// The Hyper-V session: the arguments the driver starts PowerShell with,
// its first line, and the line of each request.
var (
	sessionArgs  = []string{"-NoLogo", "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-Command", "-"}
	sessionSetup = "[Console]::OutputEncoding = [Text.UTF8Encoding]::new($false)"
	// readyLine is a string expression, which PowerShell writes out as
	// it is, as its own line.
	readyLine   = "'<<hwk-ready>>'"
	readyAnswer = "<<hwk-ready>>"
	requestLine = regexp.MustCompile(`^& \(\[ScriptBlock\]::Create\(\[Text\.Encoding\]::UTF8\.GetString\(\[Convert\]::FromBase64String\('([A-Za-z0-9+/=]*)'\)\)\)\)$`)
)

// session speaks the Hyper-V driver's session protocol until stdin ends.
func (p *program) session(args []string, unwrap Unwrap) int {
	p.appendTo(callsFile, mustJSON(args))
	if strings.Join(args, " ") != strings.Join(sessionArgs, " ") {
		p.unexpected(args, fmt.Sprintf("started with arguments %q, want %q", args, sessionArgs))
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	n := 0
	for in.Scan() {
		line := in.Text()
		n++
		switch {
		case n == 1:
			if line != sessionSetup {
				p.unexpected(args, fmt.Sprintf("first line %q, want the session's setup %q", line, sessionSetup))
			}
			continue
		case n == 2:
			if line != readyLine {
				p.unexpected(args, fmt.Sprintf("second line %q, want the session's ready check %q", line, readyLine))
				continue
			}
			if p.cfg.Silent {
				// As Wine's powershell.exe: it reads on and answers nothing.
				continue
			}
			fmt.Fprintf(out, "%s\r\n", readyAnswer)
			if err := out.Flush(); err != nil {
				os.Exit(1)
			}
			continue
		case p.cfg.Silent:
			continue
		}
		m := requestLine.FindStringSubmatch(line)
		if m == nil {
			p.unexpected(args, fmt.Sprintf("a line that is not a request: %.200q", line))
			continue
		}
		wrapped, err := base64.StdEncoding.DecodeString(m[1])
		script, ok := unwrap(string(wrapped))
		if err != nil || !ok {
			p.unexpected(args, fmt.Sprintf("a request that is not a wrapped script: %.300q", wrapped))
			p.result(out, `{"ok":false,"error":{"message":"not a wrapped script","category":"ParserError"}}`)
			continue
		}
		p.result(out, p.sessionAnswer(args, script))
	}
	return 0
}

// sessionAnswer is the result line's JSON for script; a crashing
// exchange ends the process in the middle of it.
func (p *program) sessionAnswer(args []string, script string) string {
	unlock, err := p.lock()
	if err != nil {
		p.unexpected(args, err.Error())
		return errorRecord(err.Error())
	}
	defer unlock()
	e, rep, err := p.answer(Request{Script: script})
	if e == nil {
		p.unexpected(args, fmt.Sprintf("a script no rule expects (%v):\n%s", err, script))
		return errorRecord("the fake powershell.exe did not expect this script")
	}
	if err != nil {
		p.unexpected(args, fmt.Sprintf("%s: %v", e.Name, err))
		return errorRecord(err.Error())
	}
	if e.Stderr != "" {
		fmt.Fprintln(os.Stderr, e.Stderr)
	}
	if e.Crash {
		// Half a result line, then exit.
		fmt.Print("<<hwk-result>>{\"ok\":tr")
		unlock()
		os.Exit(1)
	}
	if e.Error != nil {
		return `{"ok":false,"error":` + string(e.Error) + `}`
	}
	raw := "null"
	if e.Reply != "" {
		j, err := Replies{e.Reply: rep}.JSON(e.Reply)
		if err != nil {
			p.unexpected(args, fmt.Sprintf("%s: %v", e.Name, err))
			return errorRecord(err.Error())
		}
		raw = string(j)
	}
	// The reply's text goes out as it is in the file, escapes and all.
	return `{"ok":true,"out":` + raw + `}`
}

func errorRecord(msg string) string {
	b, _ := json.Marshal(map[string]string{"message": msg, "id": "HwkFakeUnexpected", "category": "NotImplemented", "exception": "System.NotImplementedException", "target": ""})
	return `{"ok":false,"error":` + string(b) + `}`
}

// result writes a framed result, lines ended as Windows ends them.
func (p *program) result(out *bufio.Writer, result string) {
	fmt.Fprintf(out, "<<hwk-result>>%s\r\n<<hwk-end>>\r\n", result)
	if err := out.Flush(); err != nil {
		os.Exit(1)
	}
}

func (p *program) path(name string) string { return filepath.Join(p.dir, name) }

// lock takes the fake's lock file: the requests of one test are answered
// one at a time even if the code under test did not serialize them. It
// is an operating-system lock (internal/state: flock, LockFileEx), which the
// system drops when its holder dies: a fake the code under test kills in
// the middle of a request (a timeout) does not leave the next one
// waiting for a lock nobody holds, and on Windows no file has to be
// deleted to unlock, which fails while another process (a virus
// scanner, the indexer) has it open.
func (p *program) lock() (func(), error) {
	path := p.path(lockFile)
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := state.AcquireLock(path, "the fake's lock")
		if err == nil {
			return func() { l.Release() }, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *program) appendTo(name, text string) {
	f, err := os.OpenFile(p.path(name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake program:", err)
		os.Exit(2)
	}
	defer f.Close()
	fmt.Fprintln(f, text)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func countLines(path string) int {
	data, _ := os.ReadFile(path)
	return strings.Count(string(data), "\n")
}
