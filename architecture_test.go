package hwk_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// hwk's layering, as rules over the packages' imports (their whole
// dependency closure, tests left out). Read from the bottom up:
//
//   - base: pkg/apis/config (the versioned config), pkg/state (where
//     hwk keeps things), pkg/node (a handle on a node: commands, files),
//     pkg/powershell (how a script reaches powershell.exe), pkg/ui, pkg/version, and the format packages (isoimage, udf,
//     diskimage, imagearchive, download, sshkey, debian). They know nothing of
//     drivers, clusters or commands.
//   - drivers/...: make machines and networks on a hypervisor or engine.
//     They know nothing of Kubernetes: no bootstrap, cluster, kubeconfig,
//     manifests, or Kubernetes' API types and clients.
//   - pkg/bootstrap, pkg/containerd, pkg/logs: what runs on a node to
//     make it part of a cluster; they know no driver.
//   - pkg/nodeimage, pkg/imagedist: node images, built and distributed.
//   - pkg/load: load-image, local images onto the nodes that can run
//     them, over pkg/containerd; it knows no driver, no cluster and no
//     Kubernetes API (the nodes it loads into come from pkg/cluster, by
//     pkg/cmd).
//   - pkg/cluster: the life of a cluster, over drivers and bootstrap; it
//     knows nothing of load-image.
//   - pkg/cmd, cmd/...: the command line.
//
// Test support (fakes, models, fixtures: internal/testing/... and the
// packages testSupport names) may import anything; product code imports no test support outside its
// _test.go files.
var rules = []rule{
	{
		name:   "the base imports nothing above it",
		from:   under("pkg/apis/config", "pkg/state", "pkg/node", "pkg/powershell", "pkg/ui", "pkg/version", "pkg/isoimage", "pkg/udf", "pkg/diskimage", "pkg/imagearchive", "pkg/download", "pkg/sshkey", "pkg/debian"),
		forbid: under("drivers", "pkg/bootstrap", "pkg/containerd", "pkg/logs", "pkg/cluster", "pkg/load", "pkg/cmd", "pkg/nodeimage", "pkg/imagedist", "pkg/doctor", "pkg/kubeconfig", "cmd"),
	},
	{
		name: "drivers know nothing of Kubernetes",
		from: under("drivers"),
		// k8s.io/apimachinery comes with the config (its quantities, such
		// as memory: 4Gi); Kubernetes' API types and clients do not.
		forbid: either(under("pkg/bootstrap", "pkg/containerd", "pkg/logs", "pkg/cluster", "pkg/load", "pkg/cmd", "pkg/kubeconfig", "pkg/nodeimage", "pkg/imagedist", "images", "cmd"),
			kubernetesAPI),
	},
	{
		name:   "bootstrap knows no driver",
		from:   under("pkg/bootstrap", "pkg/containerd", "pkg/logs"),
		forbid: under("drivers", "pkg/cluster", "pkg/load", "pkg/cmd", "cmd"),
	},
	{
		name: "load-image knows no driver and no cluster",
		from: under("pkg/load"),
		// Nor Kubernetes' API: load-image speaks to a node's containerd.
		forbid: either(under("drivers", "pkg/cluster", "pkg/bootstrap", "pkg/cmd", "cmd", "pkg/nodeimage", "pkg/imagedist", "pkg/logs", "pkg/kubeconfig", "pkg/doctor"),
			kubernetesAPI),
	},
	{
		name:   "the life of a cluster knows nothing of load-image",
		from:   under("pkg/cluster"),
		forbid: under("pkg/load"),
	},
	{
		name:   "product code imports no test support",
		from:   product,
		forbid: testSupport,
	},
}

const module = "github.com/hwk-dev/hwk"

// kubernetesAPI are Kubernetes' API types and clients.
var kubernetesAPI = prefix("k8s.io/api/", "k8s.io/client-go/", "k8s.io/kubernetes/", "k8s.io/kubeadm/", "k8s.io/cli-runtime/", "sigs.k8s.io/controller-runtime/")

// testSupport are the packages that exist for tests: everything under
// internal/testing (the fake programs of the Windows and VM tools, the
// Windows model, fixtures and checkers), and the *test packages beside
// what they fake (hypervtest, winimagetest...).
func testSupport(p string) bool {
	rel, ok := strings.CutPrefix(p, module+"/")
	if !ok {
		return false
	}
	return rel == "internal/testing" || strings.HasPrefix(rel, "internal/testing/") || strings.HasSuffix(rel, "test")
}

// product is the code that ships: hwk's packages but test support, the
// hack/ tools and the e2e tests.
func product(p string) bool {
	rel, ok := strings.CutPrefix(p, module+"/")
	if !ok && p != module {
		return false
	}
	return !testSupport(p) && !strings.HasPrefix(rel, "hack/") && !strings.HasPrefix(rel, "e2e")
}

type rule struct {
	name   string
	from   func(pkg string) bool
	forbid func(dep string) bool
}

// under matches the module's packages at or below each of dirs.
func under(dirs ...string) func(string) bool {
	return func(p string) bool {
		rel, ok := strings.CutPrefix(p, module+"/")
		if !ok {
			return false
		}
		for _, d := range dirs {
			if rel == d || strings.HasPrefix(rel, d+"/") {
				return true
			}
		}
		return false
	}
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

func either(fs ...func(string) bool) func(string) bool {
	return func(p string) bool { return slices.ContainsFunc(fs, func(f func(string) bool) bool { return f(p) }) }
}

// violations checks every rule over deps (package: its dependency
// closure) and says each broken one as "rule: pkg imports dep".
func violations(deps map[string][]string) []string {
	var out []string
	for _, r := range rules {
		for _, p := range slices.Sorted(maps.Keys(deps)) {
			if !r.from(p) || (r.name != "product code imports no test support" && testSupport(p)) {
				continue
			}
			for _, d := range deps[p] {
				if d != p && r.forbid(d) {
					out = append(out, fmt.Sprintf("%s: %s imports %s", r.name, strings.TrimPrefix(p, module+"/"), strings.TrimPrefix(d, module+"/")))
				}
			}
		}
	}
	return out
}

// TestArchitecture holds the tree to the rules above, over what
// `go list -deps` says each package needs (for Linux and for Windows).
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

// TestArchitectureCatches: each rule reports a package that breaks it,
// and lets one that keeps it be.
func TestArchitectureCatches(t *testing.T) {
	m := func(rel string) string { return module + "/" + rel }
	deps := map[string][]string{
		m("pkg/node"):               {m("pkg/apis/config"), m("drivers")},
		m("drivers/libvirt"):        {m("pkg/node"), m("pkg/bootstrap"), "k8s.io/api/core/v1"},
		m("pkg/bootstrap"):          {m("pkg/node"), m("drivers/hyperv")},
		m("pkg/cluster"):            {m("drivers"), m("pkg/bootstrap"), m("internal/testing/pssim"), m("pkg/load")},
		m("internal/testing/pssim"): {m("pkg/cluster")},
		m("drivers/driverstest"):    {m("pkg/bootstrap")},
		m("pkg/cmd"):                {m("pkg/cluster"), m("pkg/load"), m("drivers/all")},
		m("pkg/load"):               {m("pkg/containerd"), m("drivers/docker")},
	}
	got := violations(deps)
	want := []string{
		"the base imports nothing above it: pkg/node imports drivers",
		"drivers know nothing of Kubernetes: drivers/libvirt imports pkg/bootstrap",
		"drivers know nothing of Kubernetes: drivers/libvirt imports k8s.io/api/core/v1",
		"bootstrap knows no driver: pkg/bootstrap imports drivers/hyperv",
		"load-image knows no driver and no cluster: pkg/load imports drivers/docker",
		"the life of a cluster knows nothing of load-image: pkg/cluster imports pkg/load",
		"product code imports no test support: pkg/cluster imports internal/testing/pssim",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
