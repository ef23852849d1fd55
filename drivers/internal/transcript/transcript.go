// Package transcript holds what the tests of drivers that drive a
// program (VBoxManage, wsl.exe) answer in its place: replies in the
// program's own output formats, each file citing where its format comes
// from, and transcripts that say which call gets which reply. The fake
// program (drivers/internal/fakecli) answers from them, and a call no
// transcript line expects fails there.
//
// A transcript is a text file of exchanges:
//
//	$ showvminfo demo-cp --machinereadable
//	@ when cp-made; not cp-gone; set seen
//	< vminfo/linux-running ip=172.31.250.10
//
// "$" answers once, "$*" any number of times (at least once). Arguments
// are split at spaces; 'single quotes' keep spaces. ${VAR} is a variable
// the test sets (its directories); {name} matches a word of letters,
// digits, dots and dashes and binds it, and later uses must be equal (a
// port the driver chose). "@" lines add conditions on named flags ("when
// a b", "not c") and changes to them ("set d", "clear e"), ";" between
// clauses. "<" names the reply, with parameters its
// text uses as {key}; no "<" is a call that prints nothing and exits 0.
// Among the exchanges that match a call and whose conditions hold, the
// first not yet used answers, else the last repeatable one.
package transcript

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Exchange is one expected call and its answer.
type Exchange struct {
	Line   int
	Args   []string
	Repeat bool
	When   []string
	Not    []string
	Set    []string
	Clear  []string
	Reply  string
	Params map[string]string
}

// Transcript is the exchanges of one file.
type Transcript struct {
	Name      string
	Exchanges []Exchange
}

// Parse reads a transcript.
func Parse(name string, data []byte) (*Transcript, error) {
	t := &Transcript{Name: name}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cur := func() (*Exchange, error) {
			if len(t.Exchanges) == 0 {
				return nil, fmt.Errorf("%s:%d: %q before the first $ line", name, n, line)
			}
			return &t.Exchanges[len(t.Exchanges)-1], nil
		}
		switch {
		case strings.HasPrefix(line, "$*"), strings.HasPrefix(line, "$"):
			rep := strings.HasPrefix(line, "$*")
			args, err := Split(strings.TrimSpace(strings.TrimLeft(line, "$*")))
			if err != nil || len(args) == 0 {
				return nil, fmt.Errorf("%s:%d: bad call line: %v", name, n, err)
			}
			t.Exchanges = append(t.Exchanges, Exchange{Line: n, Args: args, Repeat: rep})
		case strings.HasPrefix(line, "@"):
			e, err := cur()
			if err != nil {
				return nil, err
			}
			for _, clause := range strings.Split(strings.TrimSpace(line[1:]), ";") {
				words := strings.Fields(clause)
				if len(words) < 2 {
					return nil, fmt.Errorf("%s:%d: bad clause %q", name, n, clause)
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
				default:
					return nil, fmt.Errorf("%s:%d: unknown clause %q", name, n, words[0])
				}
			}
		case strings.HasPrefix(line, "<"):
			e, err := cur()
			if err != nil {
				return nil, err
			}
			words, err := Split(strings.TrimSpace(line[1:]))
			if err != nil || len(words) == 0 {
				return nil, fmt.Errorf("%s:%d: bad reply line", name, n)
			}
			e.Reply, e.Params = words[0], map[string]string{}
			for _, w := range words[1:] {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					return nil, fmt.Errorf("%s:%d: reply parameter %q is not key=value", name, n, w)
				}
				e.Params[k] = v
			}
		default:
			return nil, fmt.Errorf("%s:%d: a line must start with $, $*, @, < or #: %q", name, n, line)
		}
	}
	return t, sc.Err()
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

// Reply is what the program writes and how it exits.
type Reply struct {
	Stdout, Stderr string
	Exit           int
	// UTF16 has stdout and stderr written as UTF-16LE, without a BOM.
	UTF16 bool
}

// Replies are replies by "file/section" (file without .txt).
type Replies map[string]Reply

// LoadReplies reads every .txt file in dir. A file is comment lines (#),
// at least one of them a "Source:" line citing the format, then sections
// each headed "== name ==": standard output, then optionally a line
// "--- stderr" and standard error, "--- exit N", and "--- utf-16le" for a
// reply the program writes in UTF-16LE (wsl.exe's own messages). Lines
// end in CRLF where the file's "# Newlines: crlf" says so.
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

var sectionRE = regexp.MustCompile(`^== ([\w.-]+) ==$`)

func (r Replies) parse(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	file := strings.TrimSuffix(filepath.Base(path), ".txt")
	sourced, crlf := false, false
	name, part := "", "stdout"
	var rep Reply
	var out, errb strings.Builder
	flush := func() {
		if name == "" {
			return
		}
		rep.Stdout, rep.Stderr = out.String(), errb.String()
		r[file+"/"+name] = rep
		rep = Reply{}
		out.Reset()
		errb.Reset()
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case name == "" && strings.HasPrefix(line, "#"):
			if strings.Contains(line, "Source:") {
				sourced = true
			}
			if strings.TrimSpace(line) == "# Newlines: crlf" {
				crlf = true
			}
		case sectionRE.MatchString(line):
			flush()
			name, part = sectionRE.FindStringSubmatch(line)[1], "stdout"
			if _, dup := r[file+"/"+name]; dup {
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
			errb.WriteString(line + eol(crlf))
		default:
			out.WriteString(line + eol(crlf))
		}
	}
	flush()
	if !sourced {
		return fmt.Errorf("%s cites no source for its format (a \"# Source:\" line before the first reply)", path)
	}
	return sc.Err()
}

func eol(crlf bool) string {
	if crlf {
		return "\r\n"
	}
	return "\n"
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

// Expand replaces ${VAR} in s from vars.
func Expand(s string, vars map[string]string) string {
	return varRE.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vars[varRE.FindStringSubmatch(m)[1]]; ok {
			return v
		}
		return m
	})
}

// match matches args against the exchange's pattern, returning the words
// it binds; bound are the words bound before.
func (e *Exchange) match(args []string, vars, bound map[string]string) (map[string]string, bool) {
	if len(args) != len(e.Args) {
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
		m := regexp.MustCompile("^" + re.String() + "$").FindStringSubmatch(args[i])
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

// Answer finds the exchange that answers args and records it in st; ok
// is false when none does.
func (t *Transcript) Answer(st *State, args []string, vars map[string]string) (*Exchange, bool) {
	if len(st.Used) != len(t.Exchanges) {
		st.Used = make([]int, len(t.Exchanges))
	}
	if st.Captures == nil {
		st.Captures = map[string]string{}
	}
	pick, binds := -1, map[string]string(nil)
	for i := range t.Exchanges {
		e := &t.Exchanges[i]
		if !e.holds(st.Flags) {
			continue
		}
		got, ok := e.match(args, vars, st.Captures)
		if !ok {
			continue
		}
		if st.Used[i] == 0 {
			pick, binds = i, got
			break
		}
		if e.Repeat {
			pick, binds = i, got
		}
	}
	if pick < 0 {
		return nil, false
	}
	e := &t.Exchanges[pick]
	st.Used[pick]++
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

// Unused lists the exchanges that never answered.
func (t *Transcript) Unused(st *State) []string {
	var out []string
	for i, e := range t.Exchanges {
		if i >= len(st.Used) || st.Used[i] == 0 {
			out = append(out, fmt.Sprintf("%s:%d: %s", t.Name, e.Line, strings.Join(e.Args, " ")))
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
