package build

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"text/template"

	"go.yaml.in/yaml/v3"

	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/node-images/linux"
)

// recipe is node-images/linux/components.yaml and images/linux.yaml.
type recipe struct {
	Debian     Debian          `yaml:"debian"`
	Components []component     `yaml:"components"`
	FromImages []nodeFromImage `yaml:"fromImages"`
	Userland   Debian          `yaml:"userland"`
	Images     []imageSpec     `yaml:"images"`
}

// nodeFromImage names files of one of the node's images that the node's
// root carries too, at the same paths (components.yaml's fromImages).
type nodeFromImage struct {
	Image string   `yaml:"image"`
	Files []string `yaml:"files"`
}

// Debian is a recipe's Debian root: components.yaml's debian section (the
// node) or images/linux.yaml's userland section (images that need a small
// Debian).
type Debian struct {
	Suite       string   `yaml:"suite"`
	Mirror      string   `yaml:"mirror"`
	Packages    []string `yaml:"packages"`
	KernelPaths []string `yaml:"kernelPaths"`
}

// component is one thing built or downloaded for the node: its binaries
// land in the rootfs (install) or only in images (build).
type component struct {
	Name    string            `yaml:"name"`
	Version string            `yaml:"version"`
	Install map[string]string `yaml:"install"`
	Build   []string          `yaml:"build"`
	Source  sourceBuild       `yaml:"source"`
	Release []releaseArtifact `yaml:"release"`
}

type sourceBuild struct {
	// Module names the wrapper module in node-images/linux/modules; empty
	// with C set.
	Module   string   `yaml:"module"`
	Packages []string `yaml:"packages"`
	CGO      bool     `yaml:"cgo"`
	Static   bool     `yaml:"static"`
	Tags     []string `yaml:"tags"`
	LDFlags  []string `yaml:"ldflags"`
	// Rename maps a built binary (named by go build after its package) to
	// the name it has in the image.
	Rename map[string]string `yaml:"rename"`
	// Main names a one-file Go program in images/ (no dependencies), built
	// as a module of its own instead of a wrapper module.
	Main string `yaml:"main"`
}

type releaseArtifact struct {
	URL  string `yaml:"url"`
	Sums string `yaml:"sums"`
	// Names makes one artifact per name ({{.Name}} in URL and Sums), each
	// a plain binary of that name.
	Names []string `yaml:"names"`
	// As names a plain binary downloaded under another name (runc.amd64).
	As string `yaml:"as"`
	// Extract maps members of a .tar.gz (by base name) to binary names.
	Extract map[string]string `yaml:"extract"`
}

type imageSpec struct {
	Name string `yaml:"name"`
	Tag  string `yaml:"tag"`
	// KubeadmTag is the tag kubeadm gives the image (tag: kubeadm), a
	// template of its component's version; {{.Version}} unless said.
	KubeadmTag string      `yaml:"kubeadmTag"`
	Component  string      `yaml:"component"`
	Base       string      `yaml:"base"`
	Files      []imageFile `yaml:"files"`
	Tree       []imageFile `yaml:"tree"`
	Empty      []emptyFile `yaml:"empty"`
	Env        []string    `yaml:"env"`
	Entrypoint []string    `yaml:"entrypoint"`
	Cmd        []string    `yaml:"cmd"`
	User       string      `yaml:"user"`
}

type imageFile struct {
	Module string `yaml:"module"`
	From   string `yaml:"from"`
	To     string `yaml:"to"`
}

type emptyFile struct {
	Path string `yaml:"path"`
	UID  int    `yaml:"uid"`
}

// DebianRecipes returns the node's and the userland's Debian sections of
// the embedded recipe: what hack/debianlock resolves into the committed
// locks, and what the lock test compares them with.
func DebianRecipes() (node, userland Debian, err error) {
	r, err := loadRecipe()
	if err != nil {
		return Debian{}, Debian{}, err
	}
	return r.Debian, r.Userland, nil
}

// loadRecipe reads the embedded recipe files.
func loadRecipe() (*recipe, error) {
	var r recipe
	for _, f := range []struct {
		fsys fs.FS
		name string
	}{{linux.Recipe, "components.yaml"}, {images.Recipe, "linux.yaml"}} {
		data, err := fs.ReadFile(f.fsys, f.name)
		if err != nil {
			return nil, fmt.Errorf("read recipe %s: %w", f.name, err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("recipe %s: %w", f.name, err)
		}
	}
	return &r, r.check()
}

// check catches recipe mistakes before hours of building do.
func (r *recipe) check() error {
	bins := map[string]bool{}
	for _, c := range r.Components {
		for _, b := range c.binaries() {
			bins[c.Name+"/"+b] = true
		}
	}
	for _, im := range r.Images {
		if r.component(im.Component) == nil {
			return fmt.Errorf("recipe: image %s names unknown component %q", im.Name, im.Component)
		}
		for _, f := range im.Files {
			if !bins[f.From] {
				return fmt.Errorf("recipe: image %s takes %s, which no component builds", im.Name, f.From)
			}
		}
		if im.Base != "" && im.Base != "scratch" && im.Base != "userland" {
			return fmt.Errorf("recipe: image %s: base %q is not scratch or userland", im.Name, im.Base)
		}
	}
	for _, f := range r.FromImages {
		if !slices.ContainsFunc(r.Images, func(im imageSpec) bool { return im.Name == f.Image }) {
			return fmt.Errorf("recipe: fromImages names %s, which is not one of the images", f.Image)
		}
		if len(f.Files) == 0 {
			return fmt.Errorf("recipe: fromImages %s lists no files", f.Image)
		}
		for _, name := range f.Files {
			if name == "" || path.IsAbs(name) || path.Clean(name) != name || strings.HasPrefix(name, "../") {
				return fmt.Errorf("recipe: fromImages %s: %q is not a clean relative path", f.Image, name)
			}
		}
	}
	return nil
}

func (r *recipe) component(name string) *component {
	for i := range r.Components {
		if r.Components[i].Name == name {
			return &r.Components[i]
		}
	}
	return nil
}

// binaries lists every binary the component provides, sorted by role:
// those installed on the node first, then the ones only images use.
func (c *component) binaries() []string {
	var out []string
	for b := range c.Install {
		out = append(out, b)
	}
	slices.Sort(out)
	return append(out, c.Build...)
}

// vars are what recipe templates may use.
type vars struct {
	Name    string
	Version string
	URL     string
}

// Bare returns the version without its leading "v" (containerd's file names).
func (v vars) Bare() string { return strings.TrimPrefix(v.Version, "v") }

// Major and Minor split a Kubernetes version for its version ldflags.
func (v vars) Major() string { return part(v.Bare(), 0) }
func (v vars) Minor() string { return part(v.Bare(), 1) }

func part(v string, i int) string {
	p := strings.Split(v, ".")
	if i < len(p) {
		return p[i]
	}
	return ""
}

func expand(tmpl string, v vars) (string, error) {
	t, err := template.New("").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return "", fmt.Errorf("recipe template %q: %w", tmpl, err)
	}
	var b strings.Builder
	if err := t.Execute(&b, v); err != nil {
		return "", fmt.Errorf("recipe template %q: %w", tmpl, err)
	}
	return b.String(), nil
}
