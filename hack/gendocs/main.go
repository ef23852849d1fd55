// Command gendocs writes the site's reference pages from the code, so they
// cannot drift from it: every command's page from the cobra command tree
// (cobra's own doc generator), and the cluster config's page from the
// types in pkg/apis/config, their field comments, and the defaults
// SetDefaults fills in; the GitHub Action's page from action.yml. `make docs` runs it; its test fails when the
// committed pages differ from what it writes.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	site := flag.String("site", "site/content/docs/reference", "where the reference pages go")
	types := flag.String("types", "pkg/apis/config/types.go", "the config types' source")
	action := flag.String("action", "action.yml", "the GitHub Action's metadata")
	flag.Parse()
	if err := write(*site, *types, *action); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

// write writes every page under dir.
func write(dir, typesFile, actionFile string) error {
	pages, err := Pages(typesFile, actionFile)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for name, content := range pages {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return err
		}
	}
	return nil
}
