package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads a config file and decodes it strictly: see Decode.
func Load(path string) (*Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := Decode(data)
	var errs Errors
	if err != nil && !errors.As(err, &errs) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, err
}

// Limits on a config file, far above any real one (a few KiB, a handful
// of nodes), so that a mistaken or crafted file is refused rather than
// worked through: defaulting and validating nodes is not linear in their
// number.
const (
	maxConfigSize = 1 << 20
	maxListItems  = 1000
	// maxSuggestKey is the longest key a suggestion is looked for: the
	// edit distance is quadratic, and no field name is near that long.
	maxSuggestKey = 64
)

// Decode decodes one YAML document strictly. apiVersion and kind are read
// first and pick the schema; then every key is checked against that schema
// before anything is decoded, so the result lists every unknown field and
// every value of the wrong type at once, each with its field path and line.
// Such problems come back as Errors.
func Decode(data []byte) (*Cluster, error) {
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("the config is %d bytes, more than the %d KiB hwk reads; a cluster config is a few KiB", len(data), maxConfigSize>>10)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Errors{{Path: "apiVersion", Message: "the file is empty; start it with apiVersion: " + APIVersion + " and kind: " + Kind}}
		}
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, Errors{{Path: "---", Line: extra.Line, Message: "a second YAML document; a config file holds exactly one Cluster"}}
	case !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}

	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, Errors{{Path: "apiVersion", Line: root.Line, Message: "the file must be a mapping that starts with apiVersion: " + APIVersion + " and kind: " + Kind}}
	}
	if errs := checkTypeMeta(root); len(errs) > 0 {
		// An unknown version means an unknown schema: checking fields
		// against ours would only add noise.
		return nil, errs
	}

	w := walker{pos: map[string]int{}}
	w.walk(root, reflect.TypeFor[Cluster](), "")
	if len(w.errs) > 0 {
		return nil, w.errs
	}
	var c Cluster
	if err := root.Decode(&c); err != nil {
		// The walk should have caught everything the decoder rejects.
		return nil, fmt.Errorf("decode config: %w", err)
	}
	c.setPositions(w.pos)
	return &c, nil
}

func checkTypeMeta(root *yaml.Node) Errors {
	var errs Errors
	check := func(key, want string) {
		k, v := lookup(root, key)
		switch {
		case v == nil:
			errs = append(errs, FieldError{Path: key, Message: fmt.Sprintf("missing; add %s: %s", key, want)})
		case v.Value != want:
			errs = append(errs, FieldError{Path: key, Line: k.Line, Message: fmt.Sprintf("%q is not supported; use %s", v.Value, want)})
		}
	}
	check("apiVersion", APIVersion)
	check("kind", Kind)
	return errs
}

func lookup(m *yaml.Node, key string) (k, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// walker checks a YAML tree against a Go type and remembers the line of
// every field path it sees.
type walker struct {
	pos  map[string]int
	errs Errors
}

func (w *walker) fail(path string, line int, format string, args ...any) {
	w.errs = append(w.errs, FieldError{Path: path, Line: line, Message: fmt.Sprintf(format, args...)})
}

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	isNull := n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
	switch t.Kind() {
	case reflect.Struct:
		if isNull {
			return
		}
		if n.Kind != yaml.MappingNode {
			w.fail(path, n.Line, "must be a mapping of fields, not %s", describe(n))
			return
		}
		fields := yamlFields(t)
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Value == "" {
				w.fail(orTop(path), k.Line, "has a key that is %s; keys are field names", describeKey(k))
				continue
			}
			p := joinPath(path, k.Value)
			if first, dup := seen[k.Value]; dup {
				w.fail(p, k.Line, "set twice (first on line %d); keep one", first)
				continue
			}
			seen[k.Value] = k.Line
			w.pos[p] = k.Line
			f, ok := fields[k.Value]
			if !ok {
				w.fail(p, k.Line, "unknown field%s", suggest(k.Value, fields))
				continue
			}
			w.walk(v, f, p)
		}
	case reflect.Slice:
		if isNull {
			return
		}
		if n.Kind != yaml.SequenceNode {
			w.fail(path, n.Line, "must be a list, not %s", describe(n))
			return
		}
		if len(n.Content) > maxListItems {
			w.fail(path, n.Line, "lists %d entries; hwk takes at most %d", len(n.Content), maxListItems)
			return
		}
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			w.pos[p] = item.Line
			w.walk(item, t.Elem(), p)
		}
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			w.fail(path, n.Line, "%s is not a whole number; use e.g. %s", describe(n), exampleInt(path))
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			w.fail(path, n.Line, "must be a single value, not %s", describe(n))
		}
	case reflect.Bool:
		if !isNull && (n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool") {
			w.fail(path, n.Line, "%s is not true or false", describe(n))
		}
	}
}

// orTop names the top of the file for a problem outside any field.
func orTop(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

// describeKey returns what a key that is no field name is.
func describeKey(k *yaml.Node) string {
	if k.Kind == yaml.ScalarNode {
		return "empty"
	}
	return describe(k)
}

// exampleInt returns the example an integer field's type error suggests.
func exampleInt(path string) string {
	switch {
	case strings.HasSuffix(path, "cpus"):
		return "2"
	case strings.HasSuffix(path, "vxlanVNI"):
		return fmt.Sprint(DefaultVXLANVNI)
	case strings.HasSuffix(path, "vxlanPort"):
		return fmt.Sprint(DefaultVXLANPort)
	default:
		return fmt.Sprint(DefaultAPIServerPort)
	}
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return fmt.Sprintf("%q", n.Value)
	}
}

func joinPath(parent, field string) string {
	if parent == "" {
		return field
	}
	return parent + "." + field
}

// yamlFields maps each YAML key of a struct type to its Go type.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = f.Type
	}
	return fields
}

// suggest names the known field closest to a misspelled one, or lists
// them all when none is close.
func suggest(key string, fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(key) > maxSuggestKey {
		return "; known fields here: " + strings.Join(names, ", ")
	}
	// Farther than this is a different word, not a typo: one edit for
	// short keys, two for longer ones.
	limit := 1
	if len(key) > 4 {
		limit = 2
	}
	best, bestDist := "", limit+1
	for _, n := range names {
		if d := editDistance(strings.ToLower(key), strings.ToLower(n)); d < bestDist {
			best, bestDist = n, d
		}
	}
	if best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return "; known fields here: " + strings.Join(names, ", ")
}

// editDistance counts the insertions, deletions, substitutions and swaps
// of adjacent letters between two short strings (optimal string
// alignment): "memroy" is one edit from "memory".
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
