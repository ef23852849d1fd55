package pssim

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// PSError is an error the script would see: a terminating error, or a
// non-terminating one under -ErrorAction Stop.
type PSError struct {
	Message string
	// Script and Line are where the statement that failed is.
	Script string
	Line   int
}

func (e *PSError) Error() string { return fmt.Sprintf("%s (line %d)", e.Message, e.Line) }

// nonTerminating marks a cmdlet's error that $ErrorActionPreference
// decides the fate of.
type nonTerminating struct{ msg string }

func (e nonTerminating) Error() string { return e.msg }

// Control flow, carried as errors.
type (
	returnSignal struct{ v any }
	exitSignal   struct{ code int }
	// haltSignal ends every script: the machine restarts or powers off.
	haltSignal struct{ why string }
	// loopSignal is break or continue.
	loopSignal struct{ brk bool }
)

func (l loopSignal) Error() string {
	if l.brk {
		return "break"
	}
	return "continue"
}

func (returnSignal) Error() string { return "return" }
func (exitSignal) Error() string   { return "exit" }
func (h haltSignal) Error() string { return "the machine " + h.why }

type scope struct {
	vars   map[string]any
	parent *scope
	// script is the name of the script the scope runs, for messages.
	script string
}

func (s *scope) get(name string) (any, bool) {
	name = strings.ToLower(name)
	for c := s; c != nil; c = c.parent {
		if v, ok := c.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

func (s *scope) set(name string, v any) { s.vars[strings.ToLower(name)] = v }

func newScope(parent *scope) *scope {
	sc := &scope{vars: map[string]any{}, parent: parent}
	if parent != nil {
		sc.script = parent.script
	}
	return sc
}

type function struct {
	params []param
	body   []stmt
}

type param struct {
	name string
	def  string
}

// interp runs statements against a machine.
type interp struct {
	m      *Machine
	funcs  map[string]*function
	script string
	line   int
}

// runBlock runs statements, returning their output.
func (in *interp) runBlock(body []stmt, sc *scope) ([]any, error) {
	var out []any
	for _, s := range body {
		o, err := in.runStmt(s, sc)
		out = append(out, o...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func (in *interp) fail(format string, args ...any) error {
	return &PSError{Message: fmt.Sprintf(format, args...), Script: in.script, Line: in.line}
}

func (in *interp) runStmt(s stmt, sc *scope) ([]any, error) {
	in.line = s.line
	switch s.kind {
	case "function":
		in.funcs[strings.ToLower(s.text)] = &function{params: parseParams(s.cond), body: s.body}
		return nil, nil
	case "if":
		branches := append([]elif{{s.cond, s.body}}, s.elifs...)
		for _, b := range branches {
			v, err := in.eval(b.cond, sc)
			if err != nil {
				return nil, err
			}
			if truthy(v) {
				return in.runBlock(b.body, sc)
			}
		}
		return in.runBlock(s.els, sc)
	case "foreach":
		name, list, ok := strings.Cut(s.cond, " in ")
		if !ok || !strings.HasPrefix(strings.TrimSpace(name), "$") {
			return nil, in.fail("pssim: foreach (%s) is not ($x in ...)", s.cond)
		}
		v, err := in.eval(list, sc)
		if err != nil {
			return nil, err
		}
		var out []any
		for _, item := range asList(v) {
			sc.set(strings.TrimPrefix(strings.TrimSpace(name), "$"), item)
			o, err := in.runBlock(s.body, sc)
			out = append(out, o...)
			var loop loopSignal
			if errors.As(err, &loop) {
				if loop.brk {
					break
				}
				continue
			}
			if err != nil {
				return out, err
			}
		}
		return out, nil
	case "switch":
		v, err := in.eval(s.cond, sc)
		if err != nil {
			return nil, err
		}
		for _, c := range s.cases {
			if strings.EqualFold(c.label, "default") || equal(v, literal(c.label)) {
				return in.runBlock(c.body, sc)
			}
		}
		for _, c := range s.cases {
			if strings.EqualFold(c.label, "default") {
				return in.runBlock(c.body, sc)
			}
		}
		return nil, nil
	case "try":
		out, err := in.runBlock(s.body, sc)
		var halt haltSignal
		var ex exitSignal
		var ret returnSignal
		var loop loopSignal
		if err != nil && s.hasCatch && !errors.As(err, &halt) && !errors.As(err, &ex) && !errors.As(err, &ret) && !errors.As(err, &loop) {
			rec := errorRecord(err)
			sc.set("_", rec)
			var o []any
			o, err = in.runBlock(s.catch, sc)
			out = append(out, o...)
		}
		if s.finally != nil {
			o, ferr := in.runBlock(s.finally, sc)
			out = append(out, o...)
			if ferr != nil {
				return out, ferr
			}
		}
		return out, err
	}
	return in.plain(s.text, sc)
}

func errorRecord(err error) *Object {
	msg := err.Error()
	pos, line := "", 0
	var pe *PSError
	if errors.As(err, &pe) {
		msg, line = pe.Message, pe.Line
		pos = fmt.Sprintf("At %s:%d char:1", pe.Script, pe.Line)
	}
	return newObject("ErrorRecord",
		"Exception", newObject("Exception", "Message", msg),
		"InvocationInfo", newObject("InvocationInfo", "PositionMessage", pos, "ScriptLineNumber", line))
}

var (
	assignRE = regexp.MustCompile(`(?s)^(\$[\w:]+(?:\.\w+)*)\s*=\s*([^=].*)$`)
	numberRE = regexp.MustCompile(`^-?\d+$`)
)

// plain runs a plain statement.
func (in *interp) plain(text string, sc *scope) ([]any, error) {
	if text == "" {
		return nil, nil
	}
	lower := strings.ToLower(text)
	switch {
	case lower == "break" || lower == "continue":
		return nil, loopSignal{brk: lower == "break"}
	case lower == "throw" || strings.HasPrefix(lower, "throw "):
		v, err := in.eval(strings.TrimSpace(text[5:]), sc)
		if err != nil {
			return nil, err
		}
		return nil, in.fail("%s", str(v))
	case lower == "return" || strings.HasPrefix(lower, "return "):
		var v any
		if len(text) > 6 {
			var err error
			if v, err = in.pipeline(strings.TrimSpace(text[6:]), sc); err != nil {
				return nil, err
			}
		}
		return nil, returnSignal{v}
	case lower == "exit" || strings.HasPrefix(lower, "exit "):
		code := 0
		if len(text) > 4 {
			v, err := in.eval(strings.TrimSpace(text[4:]), sc)
			if err != nil {
				return nil, err
			}
			code = toInt(v)
		}
		return nil, exitSignal{code}
	}
	if m := assignRE.FindStringSubmatch(text); m != nil {
		v, err := in.pipeline(m[2], sc)
		if err != nil {
			return nil, err
		}
		target := strings.Split(strings.TrimPrefix(m[1], "$"), ".")
		if len(target) == 1 {
			if strings.HasPrefix(strings.ToLower(target[0]), "env:") {
				in.m.Env[strings.ToLower(target[0][4:])] = str(v)
			} else {
				sc.set(target[0], v)
			}
			return nil, nil
		}
		obj, _ := sc.get(target[0])
		for _, p := range target[1 : len(target)-1] {
			obj = property(obj, p)
		}
		return nil, in.setProperty(obj, target[len(target)-1], v)
	}
	v, err := in.pipeline(text, sc)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, nil
	}
	return asList(v), nil
}

// setProperty is the one property assignment the scripts make on
// Windows' objects: a file's IsReadOnly.
func (in *interp) setProperty(obj any, name string, v any) error {
	switch o := obj.(type) {
	case *fileItem:
		if strings.EqualFold(name, "IsReadOnly") {
			return in.m.fs.setReadOnly(o.path, truthy(v))
		}
	case *Object:
		o.set(name, v)
		return nil
	}
	return in.fail("pssim: cannot set %s on %T", name, obj)
}

// pipeline runs a|b|c and returns its output (nil, one value or a list).
func (in *interp) pipeline(text string, sc *scope) (any, error) {
	parts := splitTop(text, '|')
	var input []any
	var v any
	for i, part := range parts {
		part = strings.TrimSpace(part)
		var err error
		if i == 0 && !isCommand(part) {
			v, err = in.eval(part, sc)
		} else {
			v, err = in.command(part, input, i > 0, sc)
		}
		if err != nil {
			return nil, err
		}
		input = asList(v)
	}
	return v, nil
}

// isCommand reports whether a pipeline element is a command rather than
// an expression.
func isCommand(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	if c == '&' {
		return true
	}
	if c == '$' || c == '\'' || c == '"' || c == '(' || c == '@' || c == '[' || c == '-' || c == '!' || c >= '0' && c <= '9' {
		return false
	}
	return true
}

func parseParams(s string) []param {
	var out []param
	for _, p := range splitTop(s, ',') {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		for strings.HasPrefix(p, "[") {
			end, err := matchBracket(p, 0)
			if err != nil {
				break
			}
			p = strings.TrimSpace(p[end+1:])
		}
		name, def, _ := strings.Cut(p, "=")
		out = append(out, param{name: strings.TrimPrefix(strings.TrimSpace(name), "$"), def: strings.TrimSpace(def)})
	}
	return out
}
