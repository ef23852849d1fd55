package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

const (
	typesFile  = "../../pkg/apis/config/types.go"
	actionFile = "../../action.yml"
	siteDir    = "../../site/content/docs/reference"
)

// TestPagesUpToDate: the committed reference pages are what gendocs writes
// now; run `make docs` after changing a command or the config types.
func TestPagesUpToDate(t *testing.T) {
	pages, err := Pages(typesFile, actionFile)
	if err != nil {
		t.Fatal(err)
	}
	onDisk := map[string]bool{}
	err = filepath.WalkDir(siteDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(siteDir, p)
		onDisk[filepath.ToSlash(rel)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(siteDir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not what gendocs writes (%v): run make docs", name, err)
		}
		delete(onDisk, name)
	}
	for name := range onDisk {
		t.Errorf("%s is not a page gendocs writes: remove it (make docs)", name)
	}
}

// setAll fills every exported field of v (a struct), so that YAML shows
// every key.
func setAll(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanSet() {
			continue
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Int:
			f.SetInt(1)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Struct:
			setAll(f)
		case reflect.Slice:
			s := reflect.MakeSlice(f.Type(), 1, 1)
			if s.Index(0).Kind() == reflect.Struct {
				setAll(s.Index(0))
			}
			f.Set(s)
		}
	}
}

// keys lists the YAML paths of a decoded document.
func keys(v any, prefix string, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, vv := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			*out = append(*out, p)
			keys(vv, p, out)
		}
	case []any:
		for _, e := range x {
			keys(e, prefix+"[]", out)
		}
	}
}

// TestConfigCoversEveryField: every key a cluster config can have (found
// by filling every field of config.Cluster and reading the YAML back) has
// a row in the config page, with a description.
func TestConfigCoversEveryField(t *testing.T) {
	var c config.Cluster
	setAll(reflect.ValueOf(&c).Elem())
	raw, err := yaml.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var all []string
	keys(doc, "", &all)
	sort.Strings(all)
	if len(all) < 20 {
		t.Fatalf("found only %d keys: %v", len(all), all)
	}
	pages, err := Pages(typesFile, actionFile)
	if err != nil {
		t.Fatal(err)
	}
	page := string(pages["config.md"])
	for _, k := range all {
		i := strings.Index(page, "| `"+k+"` |")
		if i < 0 {
			t.Errorf("config.md has no row for %s", k)
			continue
		}
		row := page[i:]
		row = row[:strings.Index(row, "\n")]
		cells := strings.Split(row, " | ")
		if len(cells) < 4 || strings.TrimSpace(strings.TrimSuffix(cells[len(cells)-1], "|")) == "" {
			t.Errorf("config.md row for %s has no description: %s", k, row)
		}
	}
}
