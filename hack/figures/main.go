// Command figures prints the size figures a newcomer meets: README lines,
// the public API (importable packages and their exported names), public
// packages with a single user, files per driver that match the shared
// layout, and product call sites of os/exec. Run from the module root:
//
//	go run ./hack/figures
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

const module = "github.com/hwk-dev/hwk"

type pkg struct {
	ImportPath string
	Dir        string
	Name       string
	GoFiles    []string
	Imports    []string
}

// layout is the file skeleton every driver shares (ARCHITECTURE.md, "Add a
// driver").
var layout = []string{"doc.go", "driver.go", "preflight.go", "network.go", "machine.go", "node.go"}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "figures:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	pkgs, err := list()
	if err != nil {
		return err
	}
	readme, err := lines("README.md")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "README.md lines: %d\n", readme)

	users := map[string][]string{}
	for _, p := range pkgs {
		if !product(p) {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module+"/") && !slices.Contains(users[imp], p.ImportPath) {
				users[imp] = append(users[imp], p.ImportPath)
			}
		}
	}
	var public, names int
	var single []string
	for _, p := range pkgs {
		if !importable(p) {
			continue
		}
		n, err := exported(p)
		if err != nil {
			return err
		}
		public++
		names += n
		if os.Getenv("FIGURES_VERBOSE") != "" {
			fmt.Fprintf(w, "  %4d %s\n", n, rel(p.ImportPath))
		}
		if len(users[p.ImportPath]) == 1 {
			single = append(single, fmt.Sprintf("%s (only %s)", rel(p.ImportPath), rel(users[p.ImportPath][0])))
		}
	}
	fmt.Fprintf(w, "importable packages: %d, exported names: %d\n", public, names)
	fmt.Fprintf(w, "public packages with one product user: %d\n", len(single))
	for _, s := range single {
		fmt.Fprintf(w, "  %s\n", s)
	}

	// The drivers are the packages the built-in set imports.
	for _, p := range pkgs {
		if rel(p.ImportPath) != "drivers/all" {
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/internal/drivers/") {
				continue
			}
			driverFiles(w, rel(imp))
		}
	}
	sites := 0
	for _, p := range pkgs {
		if !product(p) {
			continue
		}
		for _, f := range p.GoFiles {
			n, err := execSites(filepath.Join(p.Dir, f))
			if err != nil {
				return err
			}
			if n > 0 {
				fmt.Fprintf(w, "  os/exec: %s/%s: %d\n", rel(p.ImportPath), f, n)
			}
			sites += n
		}
	}
	fmt.Fprintf(w, "product os/exec call sites: %d\n", sites)
	return nil
}

// driverFiles prints how many of the layout's files driver dir d has.
func driverFiles(w io.Writer, d string) {
	var have []string
	for _, f := range layout {
		if _, err := os.Stat(filepath.Join(d, f)); err == nil {
			have = append(have, f)
		}
	}
	fmt.Fprintf(w, "%s: %d of %d layout files\n", d, len(have), len(layout))
}

// list returns the module's packages for GOOS=linux and GOOS=windows, once each.
func list() ([]pkg, error) {
	seen := map[string]int{}
	var out []pkg
	for _, goos := range []string{"linux", "windows"} {
		cmd := exec.Command("go", "list", "-json", "./...")
		cmd.Env = append(os.Environ(), "GOOS="+goos)
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		for dec.More() {
			var p pkg
			if err := dec.Decode(&p); err != nil {
				return nil, err
			}
			if i, ok := seen[p.ImportPath]; ok {
				for _, f := range p.GoFiles {
					if !slices.Contains(out[i].GoFiles, f) {
						out[i].GoFiles = append(out[i].GoFiles, f)
					}
				}
				for _, imp := range p.Imports {
					if !slices.Contains(out[i].Imports, imp) {
						out[i].Imports = append(out[i].Imports, imp)
					}
				}
				continue
			}
			seen[p.ImportPath] = len(out)
			out = append(out, p)
		}
	}
	return out, nil
}

func rel(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, module), "/") }

// importable is a library package another module could import: not a
// command, not only tests, not under an internal/ directory.
func importable(p pkg) bool {
	r := "/" + rel(p.ImportPath) + "/"
	return p.Name != "main" && len(p.GoFiles) > 0 && !strings.Contains(r, "/internal/")
}

// product is the code that ships: everything except test support, the
// hack/ tools and the e2e tests.
func product(p pkg) bool {
	r := rel(p.ImportPath)
	return !strings.HasPrefix(r, "internal/testing") && !strings.HasPrefix(r, "hack/") &&
		!strings.HasPrefix(r, "e2e") && !strings.HasSuffix(r, "test")
}

// exported counts the exported top-level names of p's non-test files and
// the exported methods on its types.
func exported(p pkg) (int, error) {
	n := 0
	fset := token.NewFileSet()
	for _, f := range p.GoFiles {
		file, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, parser.SkipObjectResolution)
		if err != nil {
			return 0, err
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() {
					n++
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							n++
						}
					case *ast.ValueSpec:
						for _, id := range s.Names {
							if id.IsExported() {
								n++
							}
						}
					}
				}
			}
		}
	}
	return n, nil
}

// execCall is a call of os/exec's Command or CommandContext (not
// hostexec.Command).
var execCall = regexp.MustCompile(`\bexec\.Command(Context)?\(`)

// execSites counts calls of exec.Command and exec.CommandContext in file.
func execSites(file string) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n += len(execCall.FindAllString(sc.Text(), -1))
	}
	return n, sc.Err()
}

func lines(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return bytes.Count(b, []byte("\n")), nil
}
