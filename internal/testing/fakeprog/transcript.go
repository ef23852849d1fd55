package fakeprog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Exchange is one expected request and its answer.
type Exchange struct {
	// Name names it in the record: the comment right above it, or
	// Where.
	Name string `json:"name"`
	// Where is the file and line it comes from ("file:line").
	Where string `json:"where,omitempty"`
	// Args is the pattern of a call's arguments; an exchange without
	// them matches a script that holds each text of Script (any script,
	// if none).
	Args   []string `json:"args,omitempty"`
	Script []string `json:"script,omitempty"`
	// Times is how often it may answer, 0 any number of times.
	Times int `json:"times,omitempty"`
	// Optional exchanges need not answer at all (Unused leaves them out).
	Optional bool `json:"optional,omitempty"`
	// When and Not are flags that must be set and unset; Set and Clear
	// change them once it answers.
	When  []string `json:"when,omitempty"`
	Not   []string `json:"not,omitempty"`
	Set   []string `json:"set,omitempty"`
	Clear []string `json:"clear,omitempty"`
	// Reply is the key of the reply, with Params for its {key}s; none is
	// no output (a session's null) and exit status 0.
	Reply  string            `json:"reply,omitempty"`
	Params map[string]string `json:"params,omitempty"`
	// Error is a session's error record, answered instead of a reply.
	Error json.RawMessage `json:"error,omitempty"`
	// Stderr is text written to stderr before the answer; Crash ends the
	// process in the middle of the answer, as a program that dies does.
	Stderr string `json:"stderr,omitempty"`
	Crash  bool   `json:"crash,omitempty"`
	// StdoutFile names a file whose bytes are written to stdout as they
	// are, before the reply: a program's binary output (wsl.exe --export
	// NAME - writes a tar). ${VAR}s in it are the test's.
	StdoutFile string `json:"stdoutFile,omitempty"`
}

// Transcript is the exchanges a fake answers from.
type Transcript struct {
	Name      string     `json:"name"`
	Exchanges []Exchange `json:"exchanges"`
}

// Request is what the fake was asked: a call's arguments, and the script
// it carries when the program runs scripts.
type Request struct {
	Args   []string
	Script string
}

// ParseFile reads a transcript file.
func ParseFile(path string) (*Transcript, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(filepath.Base(path), data)
}

// Parse reads a transcript: a text file of exchanges, each a request line
// and the lines after it. A comment line right above a request line names
// the exchange in the fake's record (for the test to look for); else its
// name is its file and line.
//
//	$ showvminfo demo-cp --machinereadable
//	@ when cp-made; not cp-gone; set seen
//	< vminfo/linux-running ip=172.31.250.10
//
//	%* "Win32_ComputerSystem" "[pscustomobject]@{\n    switch"
//	@ times 2
//	! {"message":"Access is denied.","category":"PermissionDenied"}
//	2> "text the program writes to stderr first"
//
// "$" is a call with these arguments, "%" a script that holds each of the
// Go-quoted texts. Either answers exactly once; "$*" and "%*" any number
// of times but at least once (see Unused), "$?" and "%?" any number of
// times, none included; "@ times N" caps how often. Arguments are split at spaces; 'single quotes' keep spaces.
// ${VAR} is a variable the test sets (its directories; a path that goes
// on after one is written with "/" and stands for the host's path,
// C:\...\x on Windows: see Expand); {name} matches a
// word of letters, digits, dots and dashes and binds it, and later uses
// must be equal (a port the driver chose). "@" lines add conditions on
// named flags ("when a b", "not c"), changes to them ("set d", "clear e"),
// "times N", and "crash" (the program dies in the middle of its answer),
// ";" between clauses. "<" names the reply, with parameters its text uses
// as {key}; no "<" is a request that gets no output and exit status 0.
// "1<" names a file whose bytes the program writes to stdout as they are
// (binary output), before the reply.
// "!" is the error record a session answers instead, "2>" the Go-quoted
// text the program writes to stderr before it answers (a "# Source:"
// comment should say where that text comes from). Among the exchanges
// that match a request and whose conditions hold, the first that has
// answers left answers.
func Parse(name string, data []byte) (*Transcript, error) {
	t := &Transcript{Name: name}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	n, note := 0, ""
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			note = ""
			continue
		}
		if strings.HasPrefix(line, "#") {
			note = strings.TrimSpace(line[1:])
			continue
		}
		above := note
		note = ""
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%s:%d: %s", name, n, fmt.Sprintf(format, args...))
		}
		if line[0] == '$' || line[0] == '%' {
			e := Exchange{Name: above, Where: fmt.Sprintf("%s:%d", name, n), Times: 1}
			if e.Name == "" {
				e.Name = e.Where
			}
			rest := line[1:]
			switch {
			case strings.HasPrefix(rest, "*"):
				e.Times, rest = 0, rest[1:]
			case strings.HasPrefix(rest, "?"):
				e.Times, e.Optional, rest = 0, true, rest[1:]
			}
			var err error
			if line[0] == '$' {
				e.Args, err = Split(strings.TrimSpace(rest))
			} else {
				e.Script, err = quoted(strings.TrimSpace(rest))
			}
			if err != nil || len(e.Args)+len(e.Script) == 0 {
				return nil, bad("bad request line: %v", err)
			}
			t.Exchanges = append(t.Exchanges, e)
			continue
		}
		if len(t.Exchanges) == 0 {
			return nil, bad("%q before the first request line", line)
		}
		e := &t.Exchanges[len(t.Exchanges)-1]
		switch {
		case strings.HasPrefix(line, "@"):
			for _, clause := range strings.Split(strings.TrimSpace(line[1:]), ";") {
				words := strings.Fields(clause)
				if len(words) == 1 && words[0] == "crash" {
					e.Crash = true
					continue
				}
				if len(words) < 2 {
					return nil, bad("bad clause %q", clause)
				}
				vals := words[1:]
				switch words[0] {
				case "when":
					e.When = append(e.When, vals...)
				case "not":
					e.Not = append(e.Not, vals...)
				case "set":
					e.Set = append(e.Set, vals...)
				case "clear":
					e.Clear = append(e.Clear, vals...)
				case "times":
					k, err := strconv.Atoi(words[1])
					if err != nil || len(words) != 2 || k < 1 {
						return nil, bad("bad clause %q", clause)
					}
					e.Times = k
				default:
					return nil, bad("unknown clause %q", words[0])
				}
			}
		case strings.HasPrefix(line, "1<"):
			words, err := Split(strings.TrimSpace(line[2:]))
			if err != nil || len(words) != 1 {
				return nil, bad("bad stdout file line")
			}
			e.StdoutFile = words[0]
		case strings.HasPrefix(line, "<"):
			words, err := Split(strings.TrimSpace(line[1:]))
			if err != nil || len(words) == 0 {
				return nil, bad("bad reply line")
			}
			e.Reply, e.Params = words[0], map[string]string{}
			for _, w := range words[1:] {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					return nil, bad("reply parameter %q is not key=value", w)
				}
				e.Params[k] = v
			}
		case strings.HasPrefix(line, "!"):
			raw := []byte(strings.TrimSpace(line[1:]))
			if !json.Valid(raw) {
				return nil, bad("the error record is not JSON")
			}
			e.Error = raw
		case strings.HasPrefix(line, "2>"):
			s, err := strconv.Unquote(strings.TrimSpace(line[2:]))
			if err != nil {
				return nil, bad("stderr is not a Go-quoted string: %v", err)
			}
			e.Stderr = s
		default:
			return nil, bad("a line must start with $, $*, $?, %%, %%*, %%?, @, <, 1<, !, 2> or #: %q", line)
		}
	}
	return t, sc.Err()
}

// quoted splits s into Go-quoted strings separated by spaces.
func quoted(s string) ([]string, error) {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return nil, fmt.Errorf("not a Go-quoted string: %.40q", s)
		}
		u, _ := strconv.Unquote(q)
		out = append(out, u)
		s = s[len(q):]
	}
	return out, nil
}

// Split splits a line at spaces, keeping 'quoted' spaces.
func Split(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, has := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			in, has = !in, true
		case r == ' ' && !in:
			if has {
				out = append(out, cur.String())
				cur.Reset()
				has = false
			}
		default:
			cur.WriteRune(r)
			has = true
		}
	}
	if in {
		return nil, fmt.Errorf("unclosed quote in %q", s)
	}
	if has {
		out = append(out, cur.String())
	}
	return out, nil
}

// State is what a transcript has done so far: how often each exchange
// answered, the flags set, the words bound.
type State struct {
	Used     []int             `json:"used"`
	Flags    []string          `json:"flags"`
	Captures map[string]string `json:"captures"`
}

var (
	varRE     = regexp.MustCompile(`\$\{(\w+)\}`)
	captureRE = regexp.MustCompile(`\{([\w.-]+)\}`)
)

// Expand replaces ${VAR} in s from vars. A ${VAR} followed by "/" is a
// host path (a directory of the test's) that the text goes on into:
// transcripts and replies write it with "/" ("${DATA}/clusters/demo"),
// and the rest of that path, up to a space, a quote or the end, is
// written with the host's separator, as filepath.Join makes it and the
// real tool prints it (C:\...\clusters\demo on Windows).
func Expand(s string, vars map[string]string) string {
	return expand(s, vars, filepath.Separator)
}

// pathEnd ends the path that follows a ${VAR}.
const pathEnd = " \t\r\n\"'`,;$"

func expand(s string, vars map[string]string, sep byte) string {
	var b strings.Builder
	last := 0
	for _, loc := range varRE.FindAllStringSubmatchIndex(s, -1) {
		if loc[0] < last {
			continue
		}
		v, ok := vars[s[loc[2]:loc[3]]]
		if !ok {
			continue
		}
		b.WriteString(s[last:loc[0]])
		b.WriteString(v)
		last = loc[1]
		if sep != '/' && strings.HasPrefix(s[last:], "/") {
			n := strings.IndexAny(s[last:], pathEnd)
			if n < 0 {
				n = len(s) - last
			}
			b.WriteString(strings.ReplaceAll(s[last:last+n], "/", string(sep)))
			last += n
		}
	}
	b.WriteString(s[last:])
	return b.String()
}

// match matches req against the exchange, returning the words it binds;
// bound are the words bound before.
func (e *Exchange) match(req Request, vars, bound map[string]string) (map[string]string, bool) {
	if len(e.Args) == 0 {
		for _, s := range e.Script {
			if !strings.Contains(req.Script, s) {
				return nil, false
			}
		}
		return nil, true
	}
	if len(req.Args) != len(e.Args) {
		return nil, false
	}
	got := map[string]string{}
	for i, pat := range e.Args {
		pat = Expand(pat, vars)
		var re strings.Builder
		var names []string
		last := 0
		for _, loc := range captureRE.FindAllStringSubmatchIndex(pat, -1) {
			re.WriteString(regexp.QuoteMeta(pat[last:loc[0]]))
			re.WriteString(`([0-9A-Za-z._-]+)`)
			names = append(names, pat[loc[2]:loc[3]])
			last = loc[1]
		}
		re.WriteString(regexp.QuoteMeta(pat[last:]))
		m := regexp.MustCompile("^" + re.String() + "$").FindStringSubmatch(req.Args[i])
		if m == nil {
			return nil, false
		}
		for j, n := range names {
			want, ok := bound[n]
			if !ok {
				want, ok = got[n]
			}
			if ok && want != m[j+1] {
				return nil, false
			}
			got[n] = m[j+1]
		}
	}
	return got, true
}

func (e *Exchange) holds(flags []string) bool {
	for _, f := range e.When {
		if !slices.Contains(flags, f) {
			return false
		}
	}
	for _, f := range e.Not {
		if slices.Contains(flags, f) {
			return false
		}
	}
	return true
}

// Answer finds the exchange that answers req and records it in st; ok is
// false when none does.
func (t *Transcript) Answer(st *State, req Request, vars map[string]string) (*Exchange, bool) {
	// A test may add exchanges as it goes (an in-process fake).
	for len(st.Used) < len(t.Exchanges) {
		st.Used = append(st.Used, 0)
	}
	if st.Captures == nil {
		st.Captures = map[string]string{}
	}
	for i := range t.Exchanges {
		e := &t.Exchanges[i]
		if (e.Times > 0 && st.Used[i] >= e.Times) || !e.holds(st.Flags) {
			continue
		}
		binds, ok := e.match(req, vars, st.Captures)
		if !ok {
			continue
		}
		st.Used[i]++
		for k, v := range binds {
			st.Captures[k] = v
		}
		for _, f := range e.Set {
			if !slices.Contains(st.Flags, f) {
				st.Flags = append(st.Flags, f)
			}
		}
		st.Flags = slices.DeleteFunc(st.Flags, func(f string) bool { return slices.Contains(e.Clear, f) })
		return e, true
	}
	return nil, false
}

// Unused lists the exchanges that never answered but should have.
func (t *Transcript) Unused(st *State) []string {
	var out []string
	for i, e := range t.Exchanges {
		if !e.Optional && (i >= len(st.Used) || st.Used[i] == 0) {
			what := strings.Join(e.Args, " ")
			if len(e.Args) == 0 {
				what = fmt.Sprintf("a script holding %q", e.Script)
			}
			where := e.Where
			if where == "" {
				where = e.Name
			}
			out = append(out, where+": "+what)
		}
	}
	return out
}

// Render is the reply of e with its parameters, the bound words and the
// variables filled in.
func (e *Exchange) Render(replies Replies, st *State, vars map[string]string) (Reply, error) {
	if e.Reply == "" {
		return Reply{}, nil
	}
	r, ok := replies[e.Reply]
	if !ok {
		return Reply{}, fmt.Errorf("no reply %q in the reply files", e.Reply)
	}
	sub := func(s string, from map[string]string) string {
		return captureRE.ReplaceAllStringFunc(s, func(m string) string {
			if v, ok := from[captureRE.FindStringSubmatch(m)[1]]; ok {
				return v
			}
			return m
		})
	}
	// Parameters first: their values may use the bound words.
	fill := func(s string) string {
		return sub(sub(Expand(s, vars), e.Params), st.Captures)
	}
	return Reply{Stdout: fill(r.Stdout), Stderr: fill(r.Stderr), Exit: r.Exit, UTF16: r.UTF16}, nil
}

// Reply is what a program writes for one request and how it exits.
type Reply struct {
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	Exit   int    `json:"exit,omitempty"`
	// UTF16 has stdout and stderr written as UTF-16LE, without a BOM
	// (as wsl.exe writes its own messages).
	UTF16 bool `json:"utf16,omitempty"`
}

// Encode is s as the reply writes it: UTF-16LE when r.UTF16 says so,
// else its bytes.
func (r Reply) Encode(s string) []byte {
	if !r.UTF16 {
		return []byte(s)
	}
	u := utf16.Encode([]rune(s))
	b := make([]byte, 0, 2*len(u))
	for _, c := range u {
		b = append(b, byte(c), byte(c>>8))
	}
	return b
}

// Replies are replies by "file/section" (file without .txt).
type Replies map[string]Reply

// LoadReplies reads every .txt file in dir. A file is comment lines (#),
// at least one of them a "Source:" line citing the format, then sections
// each headed "== name ==": standard output, then optionally a line
// "--- stderr" and standard error, "--- exit N", and "--- utf-16le" for a
// reply the program writes in UTF-16LE (wsl.exe's own messages). Lines
// end in CRLF where the file's "# Newlines: crlf" says so. A line
// starting with # is a comment wherever it is (a note on the next
// section); a reply's line that starts with # is written \# (Windows
// PowerShell's "#< CLIXML").
func LoadReplies(dir string) (Replies, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no reply files in %s (%v)", dir, err)
	}
	out := Replies{}
	for _, f := range files {
		if err := out.parse(f); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// WithPrefix is every reply whose key starts with prefix, in key order
// (the seeds of a fuzz target, say).
func (rs Replies) WithPrefix(prefix string) []Reply {
	var keys []string
	for k := range rs {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]Reply, len(keys))
	for i, k := range keys {
		out[i] = rs[k]
	}
	return out
}

// JSON is the reply called key as the one JSON value its output holds
// (a PowerShell session's result, say).
func (rs Replies) JSON(key string) (json.RawMessage, error) {
	r, ok := rs[key]
	if !ok {
		return nil, fmt.Errorf("no reply %q in the reply files", key)
	}
	raw := bytes.TrimSpace([]byte(r.Stdout))
	if !json.Valid(raw) {
		return nil, fmt.Errorf("reply %s is not JSON: %s", key, raw)
	}
	return raw, nil
}

var sectionRE = regexp.MustCompile(`^== ([\w.-]+) ==$`)

func (rs Replies) parse(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	file := strings.TrimSuffix(filepath.Base(path), ".txt")
	sourced := false
	name, part := "", "stdout"
	var rep Reply
	var out, errb strings.Builder
	flush := func() {
		if name == "" {
			return
		}
		rep.Stdout, rep.Stderr = out.String(), errb.String()
		rs[file+"/"+name] = rep
		rep = Reply{}
		out.Reset()
		errb.Reset()
	}
	eol := "\n"
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		literal := strings.HasPrefix(line, `\#`)
		if literal {
			line = line[1:]
		}
		switch {
		case !literal && strings.HasPrefix(line, "#"):
			if name == "" && strings.Contains(line, "Source:") {
				sourced = true
			}
			if name == "" && strings.TrimSpace(line) == "# Newlines: crlf" {
				eol = "\r\n"
			}
		case sectionRE.MatchString(line):
			flush()
			name, part = sectionRE.FindStringSubmatch(line)[1], "stdout"
			if _, dup := rs[file+"/"+name]; dup {
				return fmt.Errorf("%s: reply %s twice", path, name)
			}
		case name == "" && strings.TrimSpace(line) != "":
			return fmt.Errorf("%s: %q before the first section", path, line)
		case line == "--- stderr":
			part = "stderr"
		case line == "--- utf-16le":
			rep.UTF16 = true
		case strings.HasPrefix(line, "--- exit "):
			code, err := strconv.Atoi(strings.TrimPrefix(line, "--- exit "))
			if err != nil {
				return fmt.Errorf("%s: %q", path, line)
			}
			rep.Exit = code
		case name == "":
		case part == "stderr":
			errb.WriteString(line + eol)
		default:
			out.WriteString(line + eol)
		}
	}
	flush()
	if !sourced {
		return fmt.Errorf("%s cites no source for its format (a \"# Source:\" line before the first reply)", path)
	}
	return sc.Err()
}
