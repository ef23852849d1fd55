package hwk_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A skip, as the tree holds it: where, why (its message), and the kind
// of condition it stands under.
type skip struct {
	pos    string
	kind   string // require, short, platform, root, opt-in; "" when none fits
	detail string // the switch or variable the condition names
	reason string
}

// The kinds of condition a skip may stand under:
//
//   - require: a missing tool or daemon, with an HWK_REQUIRE_* switch
//     checked just before the skip (set, the test fails instead);
//   - short: go test -short;
//   - platform: runtime.GOOS or GOARCH (say, "Windows only");
//   - root: os.Geteuid(), what only root may do;
//   - opt-in: an HWK_* variable a make target sets to run a costly or
//     daemon-owning test (HWK_NODE_IMAGE_TEST, HWK_ACT...).
//
// Anything else (a missing tool with no switch) lets CI pass without
// running the test, and fails TestEverySkipHasASwitch.
var requireSwitch = regexp.MustCompile(`"(HWK_REQUIRE_[A-Z0-9_]+)"`)

// optIn finds os.Getenv("HWK_...") in a condition.
var optIn = regexp.MustCompile(`os\.Getenv\("(HWK_[A-Z0-9_]+)"\)`)

// TestEverySkipHasASwitch lists every t.Skip, t.Skipf and t.SkipNow in
// the module's Go files and fails for a skip with no written reason (a
// string literal of at least two words), or one for a missing tool or
// daemon without an HWK_REQUIRE_* switch. Every switch must be set by
// .ci/run or the make target CI runs the test with.
func TestEverySkipHasASwitch(t *testing.T) {
	skips, err := listSkips(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(skips) < 50 {
		t.Fatalf("found only %d skips: the walk missed files", len(skips))
	}
	kinds := map[string]int{}
	for _, s := range skips {
		t.Logf("%-50s %-8s %-28s %s", s.pos, s.kind, s.detail, s.reason)
		kinds[s.kind]++
		switch {
		case s.kind == "":
			t.Errorf("%s: t.Skip(%q) has no HWK_REQUIRE_* switch: check one before it (if os.Getenv(\"HWK_REQUIRE_X\") == \"1\" { t.Fatal(...) }) and set it in .ci/run, or skip only under testing.Short(), runtime.GOOS or an HWK_* opt-in variable", s.pos, s.reason)
		case len(strings.Fields(s.reason)) < 2:
			t.Errorf("%s: the skip's reason %q says too little: write why it skips and how to run it", s.pos, s.reason)
		}
	}
	t.Logf("%d skips: %v", len(skips), kinds)

	// Every switch the tests read is set where CI runs them.
	var set strings.Builder
	for _, f := range []string{".ci/run", "Makefile"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		set.Write(b)
	}
	setText := set.String()
	for _, s := range skips {
		if s.kind == "require" && !strings.Contains(setText, s.detail+"=") {
			t.Errorf("%s: %s is set neither in .ci/run nor in the Makefile, so CI skips this test when the tool is missing", s.pos, s.detail)
		}
	}
}

// TestSkipListerCatches runs the lister on a small tree: a skip for a
// missing tool with no switch has no kind; each allowed condition has
// its kind.
func TestSkipListerCatches(t *testing.T) {
	dir := t.TempDir()
	src := `package p

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
)

func TestA(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("no qemu-img here")
	}
}

func TestB(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		if os.Getenv("HWK_REQUIRE_QEMU") == "1" {
			t.Fatal("no qemu-img")
		}
		t.Skipf("no %s here", "qemu-img")
	}
	if testing.Short() {
		t.Skip("boots a VM")
	}
	if runtime.GOOS == "windows" {
		t.Skip("Windows only")
	}
	cache := os.Getenv("HWK_STAGE1_CACHE")
	if cache == "" {
		t.Skip("set HWK_STAGE1_CACHE")
	}
	if os.Geteuid() != 0 {
		t.SkipNow()
	}
}
`
	if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	skips, err := listSkips(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range skips {
		got = append(got, fmt.Sprintf("%s %s %q", s.kind, s.detail, s.reason))
	}
	want := []string{
		`  "no qemu-img here"`,
		`require HWK_REQUIRE_QEMU "no %s here"`,
		`short testing.Short() "boots a VM"`,
		`platform runtime.GOOS "Windows only"`,
		`opt-in HWK_STAGE1_CACHE "set HWK_STAGE1_CACHE"`,
		`root os.Geteuid() ""`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("listSkips =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// listSkips parses every .go file under root (but testdata, vendored and
// hidden directories) and returns its skips in file order.
func listSkips(root string) ([]skip, error) {
	var skips []skip
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			skips = append(skips, skipsIn(fset, fn.Body)...)
		}
		return nil
	})
	return skips, err
}

// skipsIn finds the skips in a function body. Each is judged by the
// statements around it: the if it stands in, and an HWK_REQUIRE_* check
// before it in the same block.
func skipsIn(fset *token.FileSet, body *ast.BlockStmt) []skip {
	getenv := map[string]string{} // variable := os.Getenv("NAME")
	var out []skip
	var walk func(n ast.Node, conds []ast.Expr, block []ast.Stmt)
	visitStmts := func(stmts []ast.Stmt, conds []ast.Expr) {
		for i, s := range stmts {
			walk(s, conds, stmts[:i])
		}
	}
	walk = func(n ast.Node, conds []ast.Expr, before []ast.Stmt) {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, rhs := range n.Rhs {
				if name := getenvName(rhs); name != "" && i < len(n.Lhs) {
					if id, ok := n.Lhs[i].(*ast.Ident); ok {
						getenv[id.Name] = name
					}
				}
			}
			for _, rhs := range n.Rhs {
				walk(rhs, conds, nil)
			}
		case *ast.IfStmt:
			if n.Init != nil {
				walk(n.Init, conds, nil)
			}
			inner := append(slices.Clone(conds), n.Cond)
			visitStmts(n.Body.List, inner)
			if n.Else != nil {
				walk(n.Else, inner, nil)
			}
		case *ast.BlockStmt:
			visitStmts(n.List, conds)
		case *ast.ForStmt:
			visitStmts(n.Body.List, conds)
		case *ast.RangeStmt:
			visitStmts(n.Body.List, conds)
		case *ast.SwitchStmt:
			for _, c := range n.Body.List {
				visitStmts(c.(*ast.CaseClause).Body, conds)
			}
		case *ast.ExprStmt:
			if call, ok := n.X.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Skip" || sel.Sel.Name == "Skipf" || sel.Sel.Name == "SkipNow") {
					if _, ok := sel.X.(*ast.Ident); ok {
						s := skip{pos: shortPos(fset.Position(call.Pos()))}
						if len(call.Args) > 0 {
							if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								s.reason, _ = strconv.Unquote(lit.Value)
							}
						}
						s.kind, s.detail = classify(conds, before, getenv)
						out = append(out, s)
						return
					}
				}
			}
			walk(n.X, conds, nil)
		case *ast.CallExpr:
			// Closures passed to t.Run and the like.
			for _, a := range n.Args {
				if fl, ok := a.(*ast.FuncLit); ok {
					visitStmts(fl.Body.List, conds)
				}
			}
		case *ast.FuncLit:
			visitStmts(n.Body.List, conds)
		}
	}
	visitStmts(body.List, nil)
	return out
}

// classify names the kind of a skip from the conditions it stands under
// (innermost last) and the statements before it in its block.
func classify(conds []ast.Expr, before []ast.Stmt, getenv map[string]string) (kind, detail string) {
	for _, s := range slices.Backward(before) {
		if is, ok := s.(*ast.IfStmt); ok {
			text := exprText(is.Cond)
			if m := requireSwitch.FindStringSubmatch(text); m != nil {
				return "require", m[1]
			}
			// if runtime.GOOS != "windows" { t.Fatal(err) }: only
			// Windows may skip.
			if strings.Contains(text, "runtime.GOOS") {
				return "platform", "runtime.GOOS"
			}
		}
	}
	for _, c := range slices.Backward(conds) {
		text := exprText(c)
		switch {
		case strings.Contains(text, "testing.Short()"):
			return "short", "testing.Short()"
		case strings.Contains(text, "runtime.GOOS") || strings.Contains(text, "runtime.GOARCH"):
			return "platform", "runtime.GOOS"
		case strings.Contains(text, "os.Geteuid()"):
			return "root", "os.Geteuid()"
		}
		if m := optIn.FindStringSubmatch(text); m != nil && !strings.HasPrefix(m[1], "HWK_REQUIRE_") {
			return "opt-in", m[1]
		}
		var name string
		ast.Inspect(c, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && name == "" && strings.HasPrefix(getenv[id.Name], "HWK_") {
				name = getenv[id.Name]
			}
			return true
		})
		if name != "" {
			return "opt-in", name
		}
	}
	return "", ""
}

// getenvName is NAME when e is os.Getenv("NAME").
func getenvName(e ast.Expr) string {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return ""
	}
	if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || exprText(sel) != "os.Getenv" {
		return ""
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok {
		return ""
	}
	name, _ := strconv.Unquote(lit.Value)
	return name
}

// exprText is the source text of a simple expression: names, selectors,
// calls, literals and operators.
func exprText(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.BasicLit:
		return e.Value
	case *ast.SelectorExpr:
		return exprText(e.X) + "." + e.Sel.Name
	case *ast.CallExpr:
		args := make([]string, len(e.Args))
		for i, a := range e.Args {
			args[i] = exprText(a)
		}
		return exprText(e.Fun) + "(" + strings.Join(args, ", ") + ")"
	case *ast.BinaryExpr:
		return exprText(e.X) + " " + e.Op.String() + " " + exprText(e.Y)
	case *ast.UnaryExpr:
		return e.Op.String() + exprText(e.X)
	case *ast.ParenExpr:
		return "(" + exprText(e.X) + ")"
	}
	return ""
}

func shortPos(p token.Position) string {
	return fmt.Sprintf("%s:%d", filepath.ToSlash(p.Filename), p.Line)
}
