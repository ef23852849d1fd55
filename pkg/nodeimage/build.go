// Package nodeimage builds hwk's node images. The Linux image comes from
// the recipe in node-images/linux and images/: binaries from source or
// from official releases, the container images every node carries, one
// Debian rootfs, and from that rootfs every driver's format. The Windows
// image is installed from the user's Windows Server ISO in a VM on the
// Windows host (windows.go) and provisioned by node-images/windows.
// Results live in a content-addressed cache, so a build with unchanged
// inputs is a lookup.
package nodeimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/moby/moby/client"
)

// Source says where binaries and images come from.
type Source string

const (
	// Release downloads official binaries (checked against their published
	// checksums) and pulls images from their registries.
	Release Source = "release"
	// FromSource builds everything through the Go module proxy.
	FromSource Source = "source"
)

// Format is one of the forms a node image takes, per driver.
type Format string

const (
	FormatDocker Format = "docker" // an image in the Docker engine (docker driver)
	FormatTar    Format = "tar"    // a rootfs tarball (WSL2: wsl --import)
	FormatQCOW2  Format = "qcow2"  // libvirt
	FormatVHDX   Format = "vhdx"   // Hyper-V
	FormatVDI    Format = "vdi"    // VirtualBox
)

// Formats lists every format, in the order they are made.
var Formats = []Format{FormatDocker, FormatTar, FormatQCOW2, FormatVHDX, FormatVDI}

// DefaultDiskSize is the virtual size of the disk formats; they are sparse,
// so unused space costs nothing.
const DefaultDiskSize = 20 << 30

// Options for Build.
type Options struct {
	KubernetesVersion string
	Source            Source
	Formats           []Format
	// CacheDir is hwk's cache (state.Dirs.Cache); images live under
	// CacheDir/node-images, with build products beside them.
	CacheDir string
	DiskSize int64
	// Step runs one stage and reports it (ui.Status.Step). Nil runs quietly.
	Step func(name string, fn func() error) error
	// Log receives the output of every command the build runs.
	Log io.Writer
	// Docker connects to the engine for the docker format, and for
	// stage 2 when Kernel is nil.
	Docker func() (client.APIClient, error)
	// Kernel is where the Debian roots' second stage runs; nil is the
	// Docker engine.
	Kernel Kernel
	// VM, when set, is the hypervisor stage 2 runs in instead: a VM
	// that boots the node lock's kernel directly.
	VM drivers.KernelBooter
	// Transfers, if set, is called inside a step that moves bytes (the
	// Debian packages' download) for a way to show them: update reports
	// a transfer's bytes (ui.Transfers.Update), stop ends the display.
	Transfers func() (update func(name string, done, total int64), stop func())
	HTTP      *http.Client
}

var kubernetesVersion = regexp.MustCompile(`^v1\.(\d+)\.\d+$`)

// Validate checks the options a user gives, before anything is touched.
func (o *Options) Validate() error { return o.validate() }

func (o *Options) validate() error {
	if !kubernetesVersion.MatchString(o.KubernetesVersion) {
		return fmt.Errorf("--kubernetes-version %q is not a Kubernetes release; use a full version such as v1.35.4", o.KubernetesVersion)
	}
	if o.Source != Release && o.Source != FromSource {
		return fmt.Errorf("--source %q is not known; use release (official downloads) or source (build from the Go module proxy)", o.Source)
	}
	if len(o.Formats) == 0 {
		return errors.New("--formats is empty; name at least one of " + formatList())
	}
	for _, f := range o.Formats {
		if !slices.Contains(Formats, f) {
			return fmt.Errorf("--formats: %q is not a format; use %s", f, formatList())
		}
	}
	if o.CacheDir == "" {
		return errors.New("no cache directory")
	}
	if o.DiskSize == 0 {
		o.DiskSize = DefaultDiskSize
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Step == nil {
		o.Step = func(_ string, fn func() error) error { return fn() }
	}
	return nil
}

func formatList() string {
	var s []string
	for _, f := range Formats {
		s = append(s, string(f))
	}
	return strings.Join(s, ", ")
}

// builder carries one build's state from stage to stage.
type builder struct {
	opts   Options
	recipe *recipe
	// goos is the OS binaries are built for: "" (linux) or "windows".
	goos   string
	goVer  string
	dir    string // this image's directory in the cache
	keys   map[string]string
	bins   map[string]string // "component/binary" → path
	images []builtImage
	// hostRunsNode, when set, says whether this host runs the node's
	// binaries instead of runtime's GOOS and GOARCH (tests).
	hostRunsNode *bool
	// recipeModules, when set, holds the wrapper modules instead of the
	// recipes' (tests).
	recipeModules []fs.FS
	stages        []Stage
}

// targetOS is the GOOS of the build's binaries.
func (b *builder) targetOS() string {
	if b.goos == "" {
		return "linux"
	}
	return b.goos
}

// newBuilder is the build opts describe, its cache keys computed.
func newBuilder(ctx context.Context, opts Options) (*builder, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	r, err := loadRecipe()
	if err != nil {
		return nil, err
	}
	b := &builder{opts: opts, recipe: r, bins: map[string]string{}}
	if opts.Source == FromSource {
		if b.goVer, err = goVersion(ctx); err != nil {
			return nil, err
		}
	}
	if err := b.computeKeys(); err != nil {
		return nil, err
	}
	b.dir = filepath.Join(opts.CacheDir, "node-images", b.name())
	return b, nil
}

// Planned is one part of a build as Plan sees it before anything is made.
type Planned struct {
	// What is "component" (binaries built or downloaded) or "image" (the
	// node image itself).
	What    string
	Name    string
	Version string
	// From is "source" or "release", for a component.
	From   Source
	Cached bool
	// Dir is where the build keeps it in the cache.
	Dir string
}

// Plan is what Build would make for opts, and what of it is cached
// already, without making anything: each component with where it comes
// from and its cache directory, then the node image.
func Plan(ctx context.Context, opts Options) ([]Planned, error) {
	b, err := newBuilder(ctx, opts)
	if err != nil {
		return nil, err
	}
	var out []Planned
	for i := range b.recipe.Components {
		c := &b.recipe.Components[i]
		if len(b.needed(c)) == 0 {
			continue
		}
		dir := b.componentDir(c)
		out = append(out, Planned{What: "component", Name: c.Name, Version: b.version(c), From: b.sourceOf(c), Cached: done(dir), Dir: dir})
	}
	_, missing := b.cached(ctx)
	return append(out, Planned{What: "image", Name: b.name(), Version: opts.KubernetesVersion, From: opts.Source, Cached: len(missing) == 0, Dir: b.dir}), nil
}

// Build makes (or finds in the cache) the Linux node image described by
// opts and returns its manifest.
func Build(ctx context.Context, opts Options) (*Manifest, error) {
	b, err := newBuilder(ctx, opts)
	if err != nil {
		return nil, err
	}

	m, missing := b.cached(ctx)
	if len(missing) == 0 {
		return m, opts.Step(fmt.Sprintf("Cached node image %s", m.Name), func() error { return nil })
	}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return nil, fmt.Errorf("node image cache: %w", err)
	}
	m = b.loadManifest() // formats already made are kept

	for _, s := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"binaries", b.binaries},
		{"images", b.buildImages},
	} {
		if err := b.stage(s.name, func() error { return s.run(ctx) }); err != nil {
			return nil, err
		}
	}
	if err := b.makeFormats(ctx, m, missing); err != nil {
		return nil, err
	}
	return m, nil
}

// stage times a stage for the manifest; the Step callback shows it.
func (b *builder) stage(name string, fn func() error) error {
	start := time.Now()
	err := fn()
	b.stages = append(b.stages, Stage{Name: name, Seconds: time.Since(start).Seconds()})
	return err
}

// step runs fn as a reported, timed sub-step.
func (b *builder) step(name string, fn func() error) error {
	return b.opts.Step(name, fn)
}

// phase runs fn as a reported step, timed as a stage of the manifest.
func (b *builder) phase(stage, step string, fn func() error) error {
	return b.stage(stage, func() error { return b.step(step, fn) })
}
