package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cmd"
)

// Pages are the reference pages by path under the reference directory,
// from the config types' source and the GitHub Action's action.yml.
func Pages(typesFile, actionFile string) (map[string][]byte, error) {
	pages := map[string][]byte{
		"_index.md": []byte("---\ntitle: Reference\nweight: 90\n---\n\nGenerated from the code by `make docs` (hack/gendocs): the cluster config, every command and the GitHub Action's inputs.\n"),
	}
	cfg, err := configPage(typesFile)
	if err != nil {
		return nil, err
	}
	pages["config.md"] = cfg
	action, err := actionPage(actionFile)
	if err != nil {
		return nil, err
	}
	pages["action.md"] = action
	if err := commandPages(pages); err != nil {
		return nil, err
	}
	return pages, nil
}

// commandPages adds a page per command, under commands/.
func commandPages(pages map[string][]byte) error {
	root := cmd.NewRootCommand(cmd.Streams{})
	root.DisableAutoGenTag = true
	// Defaults hwk computes from where its executable is would name
	// wherever gendocs was built; what follows that directory is written
	// with slashes, so that the pages are the same whichever OS made them.
	exeDir := ""
	if exe, err := os.Executable(); err == nil {
		exeDir = filepath.Dir(exe)
	}
	pages["commands/_index.md"] = []byte("---\ntitle: Commands\nweight: 20\n---\n\nEvery hwk command, as `hwk COMMAND --help` prints it.\n")
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		if !c.IsAvailableCommand() && c != root {
			return nil
		}
		c.DisableAutoGenTag = true
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if exeDir != "" && strings.HasPrefix(f.DefValue, exeDir) {
				f.DefValue = "<hwk's directory>" + filepath.ToSlash(strings.TrimPrefix(f.DefValue, exeDir))
			}
		})
		var b bytes.Buffer
		name := strings.ReplaceAll(c.CommandPath(), " ", "_")
		fmt.Fprintf(&b, "---\ntitle: %q\n---\n\n", c.CommandPath())
		link := func(s string) string { return "../" + strings.ToLower(strings.TrimSuffix(s, ".md")) + "/" }
		if err := doc.GenMarkdownCustom(c, &b, link); err != nil {
			return err
		}
		pages["commands/"+name+".md"] = b.Bytes()
		for _, sub := range c.Commands() {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(root)
}

// field is one config field as the page lists it.
type field struct {
	Path, Type, Default, Doc string
}

// configPage documents every field of config.Cluster, by its YAML path,
// with its comment from the source and the default of a config with
// nothing set (on a Linux host).
func configPage(typesFile string) ([]byte, error) {
	docs, err := fieldDocs(typesFile)
	if err != nil {
		return nil, err
	}
	def, err := config.Resolve("", config.Overrides{}, config.Host{OS: "linux"})
	if err != nil {
		return nil, err
	}
	raw, err := yaml.Marshal(def)
	if err != nil {
		return nil, err
	}
	var defaults map[string]any
	if err := yaml.Unmarshal(raw, &defaults); err != nil {
		return nil, err
	}
	fields := Fields(reflect.TypeOf(config.Cluster{}), "", docs)
	var b bytes.Buffer
	b.WriteString("---\ntitle: Cluster config\nweight: 10\n---\n\n")
	b.WriteString("The fields of a cluster config (`apiVersion: hwk.dev/v1alpha1`, `kind: Cluster`), from the Go types in `pkg/apis/config` and their comments. The default is what a config that sets nothing gets on a Linux host (`hwk config validate` shows yours); the fields of `nodes[]` depend on the node's role and OS, so their defaults are in the descriptions.\n\n")
	b.WriteString("| field | type | default | description |\n|---|---|---|---|\n")
	for _, f := range fields {
		d := lookup(defaults, f.Path)
		if d == "" && f.Type == "bool" {
			d = "`false`" // omitted from the YAML when false
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Path, f.Type, d, strings.ReplaceAll(f.Doc, "|", "\\|"))
	}
	return b.Bytes(), nil
}

// Fields lists every field of t with a YAML name, depth first, by its
// YAML path (a slice's elements as NAME[]).
func Fields(t reflect.Type, prefix string, docs map[string]string) []field {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := strings.Split(sf.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		p := tag
		if prefix != "" {
			p = prefix + "." + tag
		}
		ft := sf.Type
		typ := ft.Kind().String()
		switch {
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			typ = "list"
		case ft.Kind() == reflect.Struct:
			typ = "object"
		}
		out = append(out, field{Path: p, Type: typ, Doc: docs[t.Name()+"."+sf.Name]})
		switch {
		case ft.Kind() == reflect.Struct:
			out = append(out, Fields(ft, p, docs)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, Fields(ft.Elem(), p+"[]", docs)...)
		}
	}
	return out
}

// fieldDocs reads each struct field's comment from the source: TYPE.FIELD
// to its text on one line.
func fieldDocs(file string) (map[string]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, fl := range st.Fields.List {
			text := strings.Join(strings.Fields(fl.Doc.Text()), " ")
			for _, name := range fl.Names {
				out[ts.Name.Name+"."+name.Name] = text
			}
		}
		return false
	})
	return out, nil
}

// lookup is the default at a YAML path, as the page shows it.
func lookup(m map[string]any, p string) string {
	if strings.Contains(p, "[]") {
		return "see description"
	}
	var v any = m
	for _, k := range strings.Split(p, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = mm[k]
	}
	switch x := v.(type) {
	case nil:
		return ""
	case map[string]any, []any:
		return ""
	default:
		return "`" + fmt.Sprint(x) + "`"
	}
}

// actionPage lists the GitHub Action's inputs and outputs, in the order
// action.yml declares them, with their defaults and descriptions.
func actionPage(file string) ([]byte, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Inputs  yaml.Node `yaml:"inputs"`
		Outputs yaml.Node `yaml:"outputs"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var b bytes.Buffer
	b.WriteString("---\ntitle: GitHub Action\nweight: 20\n---\n\n")
	b.WriteString("The inputs and outputs of `uses: hwk-dev/hwk@v0`, from `action.yml`. [CI](../../ci/) shows how to use it.\n\n")
	b.WriteString("| input | default | description |\n|---|---|---|\n")
	type entry struct {
		Name        string
		Description string `yaml:"description"`
		Default     string `yaml:"default"`
	}
	// entries keeps action.yml's order, which a map would lose.
	entries := func(n yaml.Node, what string) ([]entry, error) {
		if n.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s: %s is not a mapping", file, what)
		}
		var out []entry
		for i := 0; i+1 < len(n.Content); i += 2 {
			e := entry{Name: n.Content[i].Value}
			if err := n.Content[i+1].Decode(&e); err != nil {
				return nil, fmt.Errorf("%s: %s.%s: %w", file, what, e.Name, err)
			}
			if e.Description == "" {
				return nil, fmt.Errorf("%s: %s.%s has no description", file, what, e.Name)
			}
			out = append(out, e)
		}
		return out, nil
	}
	cell := func(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
	ins, err := entries(doc.Inputs, "inputs")
	if err != nil {
		return nil, err
	}
	for _, in := range ins {
		def := ""
		if in.Default != "" {
			def = "`" + in.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", in.Name, cell(def), cell(in.Description))
	}
	b.WriteString("\n| output | description |\n|---|---|\n")
	outs, err := entries(doc.Outputs, "outputs")
	if err != nil {
		return nil, err
	}
	for _, o := range outs {
		fmt.Fprintf(&b, "| `%s` | %s |\n", o.Name, cell(o.Description))
	}
	return b.Bytes(), nil
}
