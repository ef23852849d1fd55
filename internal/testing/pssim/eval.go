package pssim

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Values are string, int, bool, nil, []any, *Object, scriptBlock and
// *fileItem.

// Object is a PowerShell object: properties by case-insensitive name.
type Object struct {
	Type  string
	props map[string]any
}

func newObject(typ string, kv ...any) *Object {
	o := &Object{Type: typ, props: map[string]any{}}
	for i := 0; i+1 < len(kv); i += 2 {
		o.props[strings.ToLower(kv[i].(string))] = kv[i+1]
	}
	return o
}

// Get is the property called name.
func (o *Object) Get(name string) any { return o.props[strings.ToLower(name)] }

func (o *Object) set(name string, v any) { o.props[strings.ToLower(name)] = v }

type scriptBlock struct{ src string }

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

// ---- expressions

var binaryOps = [][]string{
	{"-and", "-or"},
	{"-eq", "-ne", "-notcontains", "-contains", "-notin", "-in", "-notmatch", "-match", "-notlike", "-like", "-replace", "-split", "-gt", "-ge", "-lt", "-le"},
}

// topOp finds the rightmost binary operator of ops outside strings and
// brackets, as " -op ".
func topOp(s string, ops []string) (int, string) {
	best, bestOp := -1, ""
	eachTop(s, func(i int) {
		if s[i] != '-' || i == 0 || (s[i-1] != ' ' && s[i-1] != ')') {
			return
		}
		for _, op := range ops {
			if len(s) > i+len(op) && strings.EqualFold(s[i:i+len(op)], op) && s[i+len(op)] == ' ' {
				best, bestOp = i, op
			}
		}
	})
	return best, bestOp
}

func (in *interp) eval(text string, sc *scope) (any, error) {
	text = strings.TrimSpace(text)
	for _, ops := range binaryOps {
		if i, op := topOp(text, ops); i > 0 {
			l, err := in.eval(text[:i], sc)
			if err != nil {
				return nil, err
			}
			// -and and -or do not evaluate their right side when the
			// left one decides.
			if lop := strings.ToLower(op); lop == "-and" && !truthy(l) || lop == "-or" && truthy(l) {
				return truthy(l), nil
			}
			r, err := in.eval(text[i+len(op):], sc)
			if err != nil {
				return nil, err
			}
			return in.binary(op, l, r)
		}
	}
	lower := strings.ToLower(text)
	if strings.HasPrefix(lower, "-not ") {
		v, err := in.eval(text[5:], sc)
		return !truthy(v), err
	}
	if strings.HasPrefix(text, "!") {
		v, err := in.eval(text[1:], sc)
		return !truthy(v), err
	}
	if parts := splitTop(text, ','); len(parts) > 1 {
		var list []any
		for _, p := range parts {
			v, err := in.eval(p, sc)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	}
	if parts := splitTop(text, '+'); len(parts) > 1 {
		acc, err := in.eval(parts[0], sc)
		if err != nil {
			return nil, err
		}
		for _, p := range parts[1:] {
			v, err := in.eval(p, sc)
			if err != nil {
				return nil, err
			}
			if a, ok := acc.(int); ok {
				acc = a + toInt(v)
			} else {
				acc = str(acc) + str(v)
			}
		}
		return acc, nil
	}
	return in.primary(text, sc)
}

func (in *interp) binary(op string, l, r any) (any, error) {
	switch strings.ToLower(op) {
	case "-and":
		return truthy(l) && truthy(r), nil
	case "-or":
		return truthy(l) || truthy(r), nil
	case "-eq":
		return equal(l, r), nil
	case "-ne":
		return !equal(l, r), nil
	case "-contains", "-notcontains":
		found := false
		for _, x := range asList(l) {
			found = found || equal(x, r)
		}
		return found == (strings.ToLower(op) == "-contains"), nil
	case "-in", "-notin":
		found := false
		for _, x := range asList(r) {
			found = found || equal(l, x)
		}
		return found == (strings.ToLower(op) == "-in"), nil
	case "-match", "-notmatch":
		re, err := regexp.Compile("(?i)" + str(r))
		if err != nil {
			return nil, in.fail("pssim: regex %q: %v", str(r), err)
		}
		return re.MatchString(str(l)) == (strings.ToLower(op) == "-match"), nil
	case "-like", "-notlike":
		return wildcard(str(r)).MatchString(str(l)) == (strings.ToLower(op) == "-like"), nil
	case "-replace":
		args := asList(r)
		if len(args) != 2 {
			return nil, in.fail("pssim: -replace wants a pattern and a replacement")
		}
		re, err := regexp.Compile("(?i)" + str(args[0]))
		if err != nil {
			return nil, in.fail("pssim: regex %q: %v", str(args[0]), err)
		}
		// .NET's $1 is Go's ${1}.
		repl := regexp.MustCompile(`\$(\d+)`).ReplaceAllString(str(args[1]), "$${$1}")
		return re.ReplaceAllString(str(l), repl), nil
	case "-split":
		re, err := regexp.Compile("(?i)" + str(r))
		if err != nil {
			return nil, in.fail("pssim: regex %q: %v", str(r), err)
		}
		var out []any
		for _, part := range re.Split(str(l), -1) {
			out = append(out, part)
		}
		return out, nil
	case "-gt":
		return toInt(l) > toInt(r), nil
	case "-ge":
		return toInt(l) >= toInt(r), nil
	case "-lt":
		return toInt(l) < toInt(r), nil
	case "-le":
		return toInt(l) <= toInt(r), nil
	}
	return nil, in.fail("pssim: operator %s", op)
}

// primary evaluates a value with its member accesses.
func (in *interp) primary(text string, sc *scope) (any, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, nil
	}
	var v any
	var rest string
	switch c := text[0]; {
	case c == '\'':
		end, err := skipString(text, 0)
		if err != nil {
			return nil, in.fail("%v", err)
		}
		v, rest = literal(text[:end]), text[end:]
	case c == '"':
		end, err := skipString(text, 0)
		if err != nil {
			return nil, in.fail("%v", err)
		}
		s, err := in.expand(text[1:end-1], sc)
		if err != nil {
			return nil, err
		}
		v, rest = s, text[end:]
	case c == '(' || strings.HasPrefix(text, "$(") || strings.HasPrefix(text, "@("):
		open := strings.Index(text, "(")
		end, err := matchBracket(text, open)
		if err != nil {
			return nil, in.fail("%v", err)
		}
		inner := text[open+1 : end]
		var out []any
		for _, st := range splitTop(inner, ';') {
			if strings.TrimSpace(st) == "" {
				continue
			}
			x, err := in.pipeline(st, sc)
			if err != nil {
				return nil, err
			}
			out = append(out, asList(x)...)
		}
		if c == '@' {
			if out == nil {
				out = []any{}
			}
			v = out
		} else {
			v = unwrap(out)
		}
		rest = text[end+1:]
	case c == '{':
		end, err := matchBracket(text, 0)
		if err != nil {
			return nil, in.fail("%v", err)
		}
		v, rest = scriptBlock{text[1:end]}, text[end+1:]
	case c == '[':
		end, err := matchBracket(text, 0)
		if err != nil {
			return nil, in.fail("%v", err)
		}
		typ := strings.ToLower(text[1:end])
		after := text[end+1:]
		if strings.HasPrefix(after, "::") {
			return in.static(typ, after[2:], sc)
		}
		x, err := in.eval(after, sc)
		if err != nil {
			return nil, err
		}
		switch typ {
		case "int":
			return toInt(x), nil
		case "string":
			return str(x), nil
		case "bool":
			return truthy(x), nil
		}
		return nil, in.fail("pssim: cast to [%s]", typ)
	case c == '$':
		j := 1
		for j < len(text) && (isWord(text[j]) || text[j] == ':') {
			j++
		}
		name := text[1:j]
		rest = text[j:]
		switch strings.ToLower(name) {
		case "true":
			v = true
		case "false":
			v = false
		case "null":
			v = nil
		default:
			if strings.HasPrefix(strings.ToLower(name), "env:") {
				e, ok := in.m.Env[strings.ToLower(name[4:])]
				if ok {
					v = e
				}
			} else {
				v, _ = sc.get(name)
			}
		}
	case numberRE.MatchString(text):
		n, _ := strconv.Atoi(text)
		return n, nil
	default:
		if isCommand(text) {
			return in.pipeline(text, sc)
		}
		return nil, in.fail("pssim: cannot read %q", text)
	}
	return in.members(v, rest, sc)
}

// members applies .Prop, .Method(args) and [index] to v.
func (in *interp) members(v any, rest string, sc *scope) (any, error) {
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		switch rest[0] {
		case '.':
			j := 1
			for j < len(rest) && isWord(rest[j]) {
				j++
			}
			name := rest[1:j]
			rest = rest[j:]
			if strings.HasPrefix(rest, "(") {
				end, err := matchBracket(rest, 0)
				if err != nil {
					return nil, in.fail("%v", err)
				}
				args, err := in.evalArgs(rest[1:end], sc)
				if err != nil {
					return nil, err
				}
				rest = rest[end+1:]
				if v, err = in.method(v, name, args); err != nil {
					return nil, err
				}
				continue
			}
			v = property(v, name)
		case '[':
			end, err := matchBracket(rest, 0)
			if err != nil {
				return nil, in.fail("%v", err)
			}
			i, err := in.eval(rest[1:end], sc)
			if err != nil {
				return nil, err
			}
			list := asList(v)
			n := toInt(i)
			if n < 0 {
				n += len(list)
			}
			if n < 0 || n >= len(list) {
				v = nil
			} else {
				v = list[n]
			}
			rest = rest[end+1:]
		default:
			return nil, in.fail("pssim: cannot read %q", rest)
		}
	}
	return v, nil
}

func isWord(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// property reads a property; over a list, of each item (PowerShell's
// member enumeration), except Count and Length.
func property(v any, name string) any {
	switch x := v.(type) {
	case *Object:
		return x.Get(name)
	case *fileItem:
		return x.property(name)
	case []any:
		if strings.EqualFold(name, "Count") || strings.EqualFold(name, "Length") {
			return len(x)
		}
		var out []any
		for _, item := range x {
			if p := property(item, name); p != nil {
				out = append(out, p)
			}
		}
		return unwrap(out)
	case string:
		if strings.EqualFold(name, "Length") {
			return len(x)
		}
	case nil:
		if strings.EqualFold(name, "Count") {
			return 0
		}
	default:
		if strings.EqualFold(name, "Count") {
			return 1
		}
	}
	return nil
}

func (in *interp) method(v any, name string, args []any) (any, error) {
	lname := strings.ToLower(name)
	switch x := v.(type) {
	case string:
		switch lname {
		case "trim":
			return strings.TrimSpace(x), nil
		case "tostring":
			return x, nil
		case "tolower":
			return strings.ToLower(x), nil
		}
	case int:
		if lname == "tostring" {
			return strconv.Itoa(x), nil
		}
	case *Object:
		if fn, ok := in.m.methods[strings.ToLower(x.Type)+"."+lname]; ok {
			return fn(x, args)
		}
	}
	return nil, in.fail("pssim: the model has no method %s on %T %v", name, v, v)
}

// evalArgs evaluates a method call's arguments, "a, b".
func (in *interp) evalArgs(inner string, sc *scope) ([]any, error) {
	var args []any
	if strings.TrimSpace(inner) == "" {
		return nil, nil
	}
	for _, a := range splitTop(inner, ',') {
		x, err := in.eval(a, sc)
		if err != nil {
			return nil, err
		}
		args = append(args, x)
	}
	return args, nil
}

// static is a .NET static member: [Type]::Member...
func (in *interp) static(typ, rest string, sc *scope) (any, error) {
	j := 0
	for j < len(rest) && isWord(rest[j]) {
		j++
	}
	member := strings.ToLower(rest[:j])
	rest = rest[j:]
	key := typ + "::" + member
	var args []any
	if strings.HasPrefix(rest, "(") {
		end, err := matchBracket(rest, 0)
		if err != nil {
			return nil, in.fail("%v", err)
		}
		if args, err = in.evalArgs(rest[1:end], sc); err != nil {
			return nil, err
		}
		rest = rest[end+1:]
	}
	fn, ok := in.m.statics[key]
	if !ok {
		return nil, in.fail("pssim: the model has no [%s]::%s", typ, member)
	}
	v, err := fn(args)
	if err != nil {
		return nil, in.fail("%v", err)
	}
	return in.members(v, rest, sc)
}

// expand is a double-quoted string's text with its variables and
// subexpressions.
func (in *interp) expand(s string, sc *scope) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '`' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(s[i])
			}
		case c == '"' && i+1 < len(s) && s[i+1] == '"':
			b.WriteByte('"')
			i++
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			end, err := matchBracket(s, i+1)
			if err != nil {
				return "", in.fail("%v", err)
			}
			v, err := in.primary(s[i:end+1], sc)
			if err != nil {
				return "", err
			}
			b.WriteString(str(v))
			i = end
		case c == '$' && i+1 < len(s) && (isWord(s[i+1]) || s[i+1] == '{'):
			j := i + 1
			var name string
			if s[j] == '{' {
				end := strings.IndexByte(s[j:], '}')
				if end < 0 {
					return "", in.fail("pssim: ${ is not closed")
				}
				name, j = s[j+1:j+end], j+end+1
			} else {
				for j < len(s) && isWord(s[j]) {
					j++
				}
				if strings.EqualFold(s[i+1:j], "env") && j < len(s) && s[j] == ':' {
					j++
					for j < len(s) && isWord(s[j]) {
						j++
					}
				}
				name = s[i+1 : j]
			}
			v, err := in.primary("$"+name, sc)
			if err != nil {
				return "", err
			}
			b.WriteString(str(v))
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// literal is a single-quoted string's value, or a bare word's.
func literal(s string) any {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'")
	}
	if numberRE.MatchString(s) {
		n, _ := strconv.Atoi(s)
		return n
	}
	return s
}

// ---- values

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case bool:
		if x {
			return "True"
		}
		return "False"
	case []any:
		parts := make([]string, len(x))
		for i, p := range x {
			parts[i] = str(p)
		}
		return strings.Join(parts, " ")
	case *fileItem:
		return x.path
	case *Object:
		if s, ok := x.Get("__string").(string); ok {
			return s
		}
		return x.Type
	}
	return fmt.Sprint(v)
}

func toInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case bool:
		if x {
			return 1
		}
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(str(v)))
	return n
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int:
		return x != 0
	case string:
		return x != ""
	case []any:
		if len(x) == 1 {
			return truthy(x[0])
		}
		return len(x) > 0
	}
	return true
}

func equal(a, b any) bool {
	if ai, ok := a.(int); ok {
		return ai == toInt(b)
	}
	if ab, ok := a.(bool); ok {
		return ab == truthy(b)
	}
	return strings.EqualFold(str(a), str(b))
}

func asList(v any) []any {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		return x
	}
	return []any{v}
}

// unwrap is PowerShell's unrolling of a pipeline's output: nothing is
// $null, one item is the item.
func unwrap(out []any) any {
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return out
}

// wildcard is a PowerShell wildcard pattern as a regular expression.
func wildcard(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("(?i)^")
	for _, r := range p {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}
