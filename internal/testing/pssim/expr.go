package pssim

import (
	"regexp"
	"strconv"
	"strings"
)

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
	case strings.HasPrefix(text, "$?"):
		// $?: whether the last statement succeeded (about_Automatic_Variables);
		// the model keeps it where a command line runs (runCommandLine).
		v, ok := sc.get("?")
		if !ok {
			return nil, in.fail("pssim: $? is kept only between a command line's statements")
		}
		return in.members(v, text[2:], sc)
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

func isWord(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
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
