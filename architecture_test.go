package hwk_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// layers is hwk's layering (ARCHITECTURE.md), bottom up. Every package of
// the module sits in exactly one layer, the one whose directory is the
// longest prefix of its path. A package may depend, directly or through
// others, only on packages of its own layer and of the layers it uses;
// forbid names outside packages it must not reach either.
var layers = []layer{
	{name: "config", dirs: []string{"pkg/apis/config", "pkg/version"}},
	// What a node image and a cluster carry: the recipes, pins and
	// manifests, as embedded files.
	{name: "recipes", dirs: []string{"images", "node-images"}, uses: []string{"config"}},
	{
		name: "base",
		// Handles and formats: a node's commands and files, where hwk
		// keeps things, the terminal, PowerShell's wire format, disk, ISO,
		// UDF and image archives, downloads, keys, Debian's archive, the
		// kubeconfig file, a node's containerd and the host programs hwk runs.
		dirs: []string{"pkg/node", "internal/containerd", "internal/state", "internal/ui", "internal/powershell", "internal/format",
			"internal/download", "internal/sshkey", "internal/debian", "internal/hostmem", "internal/kubeconfig", "internal/hostexec"},
		uses: []string{"config"},
	},
	{
		name: "drivers", dirs: []string{"drivers", "internal/drivers"},
		uses: []string{"config", "base"},
		// k8s.io/apimachinery comes with the config (its quantities, such
		// as memory: 4Gi); Kubernetes' API types and clients do not, nor
		// the kubeconfig file.
		forbid: func(dep string) bool { return kubernetesAPI(dep) || dep == module+"/internal/kubeconfig" },
	},
	{
		name: "bootstrap", dirs: []string{"internal/bootstrap", "internal/logs"},
		uses: []string{"config", "recipes", "base"},
	},
	{
		name: "load-image", dirs: []string{"internal/load"},
		uses: []string{"config", "base"}, forbid: kubernetesAPI,
	},
	{
		name: "node images", dirs: []string{"pkg/nodeimage", "internal/nodeimage"},
		uses: []string{"config", "recipes", "base", "drivers"},
	},
	{
		name: "cluster", dirs: []string{"pkg/cluster"},
		uses: []string{"config", "recipes", "base", "drivers", "bootstrap", "node images"},
	},
	{
		name: "doctor", dirs: []string{"internal/doctor"},
		uses: []string{"config", "recipes", "base", "drivers", "node images"},
	},
	{
		name: "command line", dirs: []string{"pkg/cmd", "cmd/hwk", "."},
		uses: []string{"config", "recipes", "base", "drivers", "bootstrap", "load-image", "node images", "cluster", "doctor"},
	},
	{
		name: "node programs", dirs: []string{"cmd/hwk-seed", "cmd/hwk-kubelet", "internal/winseed", "images/pause"},
		uses: []string{"config", "base"},
	},
	// Fakes, models, fixtures, tools and end-to-end tests may use anything;
	// nothing above uses them.
	{name: "test support", dirs: []string{"internal/testing", "hack", "e2e", "action"}, any: true},
}

const module = "github.com/hwk-dev/hwk"

// kubernetesAPI are Kubernetes' API types and clients.
var kubernetesAPI = prefix("k8s.io/api/", "k8s.io/client-go/", "k8s.io/kubernetes/", "k8s.io/kubeadm/", "k8s.io/cli-runtime/", "sigs.k8s.io/controller-runtime/")

type layer struct {
	name   string
	dirs   []string
	uses   []string
	forbid func(dep string) bool
	any    bool
}

// layerOf returns the layer of a module package, or nil for one outside
// the module or in no layer.
func layerOf(p string) *layer {
	rel, ok := strings.CutPrefix(p, module+"/")
	if p == module {
		rel, ok = ".", true
	}
	if !ok {
		return nil
	}
	var best *layer
	bestLen := -1
	for i := range layers {
		for _, d := range layers[i].dirs {
			if (rel == d || strings.HasPrefix(rel, d+"/")) && len(d) > bestLen {
				best, bestLen = &layers[i], len(d)
			}
		}
	}
	return best
}

func prefix(ps ...string) func(string) bool {
	return func(p string) bool {
		for _, x := range ps {
			if strings.HasPrefix(p, x) {
				return true
			}
		}
		return false
	}
}

// violations checks deps (package: its dependency closure) against the
// layers and returns each break as "layer: pkg imports dep".
func violations(deps map[string][]string) []string {
	var out []string
	rel := func(p string) string { return strings.TrimPrefix(p, module+"/") }
	for _, p := range slices.Sorted(maps.Keys(deps)) {
		l := layerOf(p)
		if l == nil {
			if strings.HasPrefix(p, module) {
				out = append(out, fmt.Sprintf("no layer: %s", rel(p)))
			}
			continue
		}
		if l.any {
			continue
		}
		for _, d := range deps[p] {
			dl := layerOf(d)
			switch {
			case l.forbid != nil && l.forbid(d):
			case dl == nil && strings.HasPrefix(d, module):
			case dl == nil, dl == l, slices.Contains(l.uses, dl.name):
				continue
			}
			out = append(out, fmt.Sprintf("%s: %s imports %s", l.name, rel(p), rel(d)))
		}
	}
	return out
}

// TestArchitecture holds the tree to the layers, over what `go list -deps`
// returns for each package (for Linux and for Windows).
func TestArchitecture(t *testing.T) {
	for _, goos := range []string{"linux", "windows"} {
		deps := map[string][]string{}
		cmd := exec.Command("go", "list", "-json=ImportPath,Deps", "./...")
		cmd.Env = append(cmd.Environ(), "GOOS="+goos)
		out, err := cmd.Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("go list: %v\n%s", err, ee.Stderr)
			}
			t.Fatal(err)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		for {
			var p struct {
				ImportPath string
				Deps       []string
			}
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			deps[p.ImportPath] = p.Deps
		}
		if len(deps) < 40 || len(deps[module+"/pkg/cluster"]) == 0 {
			t.Fatalf("GOOS=%s: go list gave %d packages; the test reads nothing", goos, len(deps))
		}
		for _, v := range violations(deps) {
			t.Errorf("GOOS=%s: %s", goos, v)
		}
	}
}

// TestArchitectureCatches: each kind of break is reported, and a package
// that keeps to its layer is let be.
func TestArchitectureCatches(t *testing.T) {
	m := func(rel string) string { return module + "/" + rel }
	deps := map[string][]string{
		m("pkg/node"):                     {m("pkg/apis/config"), m("drivers")},
		m("internal/kubeconfig"):          {m("internal/state"), m("internal/drivers/docker")},
		m("internal/drivers/libvirt"):     {m("pkg/node"), m("internal/bootstrap"), "k8s.io/api/core/v1"},
		m("internal/bootstrap"):           {m("pkg/node"), m("internal/drivers/hyperv")},
		m("pkg/cluster"):                  {m("drivers"), m("internal/bootstrap"), m("internal/testing/pssim"), m("internal/load")},
		m("internal/testing/pssim"):       {m("pkg/cluster")},
		m("internal/testing/driverstest"): {m("internal/bootstrap")},
		m("pkg/cmd"):                      {m("pkg/cluster"), m("internal/load"), m("drivers/all")},
		m("internal/load"):                {m("internal/containerd"), m("internal/drivers/docker")},
		m("internal/drivers/docker"):      {m("images")},
		m("internal/drivers/wsl2"):        {m("internal/kubeconfig")},
		m("internal/newthing"):            {m("pkg/node")},
		m("cmd/hwk-seed"):                 {m("internal/winseed"), m("pkg/cluster")},
	}
	got := violations(deps)
	want := []string{
		"bootstrap: internal/bootstrap imports internal/drivers/hyperv",
		"drivers: internal/drivers/libvirt imports internal/bootstrap",
		"drivers: internal/drivers/libvirt imports k8s.io/api/core/v1",
		"base: internal/kubeconfig imports internal/drivers/docker",
		"drivers: internal/drivers/docker imports images",
		"drivers: internal/drivers/wsl2 imports internal/kubeconfig",
		"load-image: internal/load imports internal/drivers/docker",
		"no layer: internal/newthing",
		"base: pkg/node imports drivers",
		"node programs: cmd/hwk-seed imports pkg/cluster",
		"cluster: pkg/cluster imports internal/testing/pssim",
		"cluster: pkg/cluster imports internal/load",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// driverNamesAllowed are where a driver's name may decide what code does:
// the drivers themselves, the config that names them, and the doctor
// that reports on each. Everywhere else asks a driver's capabilities
// (drivers.Traits and the optional interfaces).
var driverNamesAllowed = []string{"drivers", "internal/drivers", "pkg/apis/config", "internal/doctor"}

// TestNoDriverNamesCompared fails when product code outside
// driverNamesAllowed compares with or switches on a config.Driver*
// constant.
func TestNoDriverNamesCompared(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Dir}}", "./...").Output()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, dir, _ := strings.Cut(line, " ")
		rel := strings.TrimPrefix(path, module+"/")
		if l := layerOf(path); l == nil || l.any || slices.ContainsFunc(driverNamesAllowed, func(d string) bool { return rel == d || strings.HasPrefix(rel, d+"/") }) {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			checked++
			for _, pos := range driverNameComparisons(t, f) {
				t.Errorf("%s compares a driver's name; ask drivers.TraitsOf or an optional interface instead", pos)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d files; the test reads nothing", checked)
	}
}

// TestNoDriverNamesComparedCatches: each form of comparison is found.
func TestNoDriverNamesComparedCatches(t *testing.T) {
	f := filepath.Join(t.TempDir(), "x.go")
	src := `package x
func a(n, d string) bool { return n == config.DriverDocker || config.DriverWSL2 != d }
func b(n string) { switch n { case config.DriverHyperV: } }
func c(n string) bool { return n == config.Linux }
`
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := driverNameComparisons(t, f); len(got) != 3 {
		t.Errorf("found %d comparisons, want 3: %v", len(got), got)
	}
}

// driverNameComparisons returns where file compares a config.Driver*
// constant with == or !=, or has one as a switch case.
func driverNameComparisons(t *testing.T, file string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	isName := func(e ast.Expr) bool {
		s, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		x, ok := s.X.(*ast.Ident)
		return ok && x.Name == "config" && strings.HasPrefix(s.Sel.Name, "Driver") && len(s.Sel.Name) > len("Driver") &&
			unicode.IsUpper(rune(s.Sel.Name[len("Driver")]))
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if (n.Op == token.EQL || n.Op == token.NEQ) && (isName(n.X) || isName(n.Y)) {
				out = append(out, fset.Position(n.Pos()).String())
			}
		case *ast.CaseClause:
			if slices.ContainsFunc(n.List, isName) {
				out = append(out, fset.Position(n.Pos()).String())
			}
		}
		return true
	})
	return out
}
