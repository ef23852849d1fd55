package pssim

import (
	"strconv"
	"strings"
)

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
