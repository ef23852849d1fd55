package pssim

import (
	"errors"
	"regexp"
	"strings"
)

// call is one command's invocation.
type call struct {
	Name  string
	named map[string]any // by lower-case parameter name; a switch is true
	pos   []any
	input []any
	// raw are a native program's arguments as strings.
	raw []string
	in  *interp
	sc  *scope
}

// Arg is the named parameter's value, or nil.
func (c *call) Arg(name string) any { return c.named[strings.ToLower(name)] }

// Has reports whether the parameter was given.
func (c *call) Has(name string) bool { _, ok := c.named[strings.ToLower(name)]; return ok }

// Str is the parameter as a string.
func (c *call) Str(name string) string { return str(c.Arg(name)) }

// Switch reports a switch parameter, honouring -Name:$false.
func (c *call) Switch(name string) bool { return c.Has(name) && truthy(c.Arg(name)) }

// Pos is the i-th positional argument.
func (c *call) Pos(i int) any {
	if i < len(c.pos) {
		return c.pos[i]
	}
	return nil
}

// switches are the parameters of the cmdlets the scripts use that take
// no value.
var switches = map[string]bool{}

func init() {
	for _, s := range strings.Fields(`force recurse file directory wait passthru norestart all online physical
		allowstartifonbatteries dontstopifgoingonbatteries atstartup raw append confirm compress parent leaf
		nologo noprofile noninteractive whatif first asjob restart`) {
		switches[s] = true
	}
}

// token is an argument's text.
type token struct {
	text  string
	param bool
}

// tokens splits a command's text into words, keeping strings and
// brackets whole; a comma between values makes one list.
func tokens(s string) []token {
	var out []token
	i := 0
	for i < len(s) {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			break
		}
		start := i
		for i < len(s) && s[i] != ' ' && s[i] != '\t' {
			c := s[i]
			switch {
			case c == '\'' || c == '"':
				end, err := skipString(s, i)
				if err != nil {
					i = len(s)
					continue
				}
				i = end
			case c == '(' || c == '{' || c == '[':
				end, err := matchBracket(s, i)
				if err != nil {
					i = len(s)
					continue
				}
				i = end + 1
			default:
				i++
			}
		}
		w := s[start:i]
		out = append(out, token{text: w, param: len(w) > 1 && w[0] == '-' && !numberRE.MatchString(w) && isWord(w[1])})
	}
	// Join "a," "b" and "a" "," "b" into "a,b".
	var joined []token
	for _, t := range out {
		if n := len(joined); n > 0 && !t.param && (strings.HasSuffix(joined[n-1].text, ",") || strings.HasPrefix(t.text, ",")) && !joined[n-1].param {
			joined[n-1].text += t.text
			continue
		}
		joined = append(joined, t)
	}
	return joined
}

// command runs one pipeline element that is a command.
func (in *interp) command(text string, input []any, piped bool, sc *scope) (any, error) {
	toks := dropRedirections(tokens(text))
	if len(toks) == 0 {
		return nil, in.fail("pssim: an empty pipeline element")
	}
	var name string
	rest := toks[1:]
	if toks[0].text == "&" || toks[0].text == "." {
		if len(rest) == 0 {
			return nil, in.fail("pssim: & with nothing to run")
		}
		var v any = rest[0].text
		if c := rest[0].text[0]; c == '$' || c == '\'' || c == '"' || c == '(' || c == '{' {
			var err error
			if v, err = in.eval(rest[0].text, sc); err != nil {
				return nil, err
			}
		}
		rest = rest[1:]
		if sb, ok := v.(scriptBlock); ok {
			body, err := parse(sb.src)
			if err != nil {
				return nil, in.fail("pssim: %v", err)
			}
			out, err := in.runBlock(body, newScope(sc))
			if errors.As(err, new(returnSignal)) {
				err = nil
			}
			return unwrap(out), err
		}
		name = str(v)
	} else {
		name = toks[0].text
	}
	c := &call{Name: name, named: map[string]any{}, input: input, in: in, sc: sc}
	if native(name) {
		for _, t := range rest {
			v, err := in.arg(t.text, sc)
			if err != nil {
				return nil, err
			}
			for _, x := range asList(v) {
				c.raw = append(c.raw, str(x))
			}
		}
		return in.m.runNative(c)
	}
	for i := 0; i < len(rest); i++ {
		t := rest[i]
		if !t.param {
			v, err := in.arg(t.text, sc)
			if err != nil {
				return nil, err
			}
			c.pos = append(c.pos, v)
			continue
		}
		pname, val, hasVal := strings.Cut(t.text[1:], ":")
		key := strings.ToLower(pname)
		switch {
		case hasVal:
			v, err := in.eval(val, sc)
			if err != nil {
				return nil, err
			}
			c.named[key] = v
		case switches[key] || i+1 >= len(rest) || rest[i+1].param:
			c.named[key] = true
		default:
			v, err := in.arg(rest[i+1].text, sc)
			if err != nil {
				return nil, err
			}
			c.named[key] = v
			i++
		}
	}
	if fn, ok := in.funcs[strings.ToLower(name)]; ok {
		return in.callFunction(fn, c)
	}
	v, err := in.m.runCmdlet(c)
	var nt nonTerminating
	if errors.As(err, &nt) {
		pref := strings.ToLower(c.Str("ErrorAction"))
		if pref == "" {
			p, _ := sc.get("ErrorActionPreference")
			pref = strings.ToLower(str(p))
		}
		if pref != "stop" {
			in.m.Errors = append(in.m.Errors, nt.msg)
			return v, nil
		}
		return nil, in.fail("%s", nt.msg)
	}
	if err != nil {
		var halt haltSignal
		if errors.As(err, &halt) {
			return nil, err
		}
		var pe *PSError
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, in.fail("%v", err)
	}
	return v, nil
}

// arg is an argument's value: a bare word is a string.
func (in *interp) arg(text string, sc *scope) (any, error) {
	if parts := splitTop(text, ','); len(parts) > 1 {
		var list []any
		for _, p := range parts {
			if strings.TrimSpace(p) == "" {
				continue
			}
			v, err := in.arg(strings.TrimSpace(p), sc)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	}
	switch c := text[0]; {
	case c == '$' || c == '\'' || c == '"' || c == '(' || c == '@' || c == '{' || c == '[':
		return in.eval(text, sc)
	}
	return literal(text), nil
}

// native reports whether name is a program rather than a cmdlet or
// function: it has a path or an extension.
func native(name string) bool {
	l := strings.ToLower(name)
	return strings.HasSuffix(l, ".exe") || strings.HasSuffix(l, ".ps1") || strings.Contains(l, `:\`)
}

func (in *interp) callFunction(fn *function, c *call) (any, error) {
	sc := newScope(c.sc)
	pos := 0
	for _, p := range fn.params {
		switch {
		case c.Has(p.name):
			sc.set(p.name, c.Arg(p.name))
		case pos < len(c.pos):
			sc.set(p.name, c.pos[pos])
			pos++
		case p.def != "":
			v, err := in.eval(p.def, sc)
			if err != nil {
				return nil, err
			}
			sc.set(p.name, v)
		default:
			sc.set(p.name, nil)
		}
	}
	sc.set("args", c.pos[min(pos, len(c.pos)):])
	out, err := in.runBlock(fn.body, sc)
	var ret returnSignal
	if errors.As(err, &ret) {
		return unwrap(append(out, asList(ret.v)...)), nil
	}
	return unwrap(out), err
}

// dropRedirections removes output redirections (*> file, 2>&1, > file):
// where output goes does not change what a command does to the machine.
func dropRedirections(toks []token) []token {
	var out []token
	for i := 0; i < len(toks); i++ {
		t := toks[i].text
		if i > 0 && redirectRE.MatchString(t) {
			if strings.HasSuffix(t, ">") {
				i++ // the target is the next word
			}
			continue
		}
		out = append(out, toks[i])
	}
	return out
}

var redirectRE = regexp.MustCompile(`^[*1-6]?>>?(&[12])?`)
