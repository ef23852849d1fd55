package pssim

import (
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
