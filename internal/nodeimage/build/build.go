package build

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// builder carries one build's state from stage to stage.
type builder struct {
	opts   nodeimage.Options
	recipe *recipe
	// goos is the OS binaries are built for: "" (linux) or "windows".
	goos   string
	goVer  string
	dir    string // this image's directory in the cache
	keys   map[string]string
	bins   map[string]string // "component/binary" → path
	images []builtImage
	// hostRunsNode, when set, reports whether this host runs the node's
	// binaries instead of runtime's GOOS and GOARCH (tests).
	hostRunsNode *bool
	// recipeModules, when set, holds the wrapper modules instead of the
	// recipes' (tests).
	recipeModules []fs.FS
	stages        []nodeimage.Stage
}

// targetOS returns the GOOS of the build's binaries.
func (b *builder) targetOS() string {
	if b.goos == "" {
		return "linux"
	}
	return b.goos
}

// newBuilder returns the build opts describe, its cache keys computed.
func newBuilder(ctx context.Context, opts nodeimage.Options) (*builder, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	r, err := loadRecipe()
	if err != nil {
		return nil, err
	}
	b := &builder{opts: opts, recipe: r, bins: map[string]string{}}
	if opts.Source == nodeimage.FromSource {
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
	From   nodeimage.Source
	Cached bool
	// Dir is where the build keeps it in the cache.
	Dir string
}

// Plan returns what Build would make for opts, and what of it is cached
// already, without making anything: each component with where it comes
// from and its cache directory, then the node image.
func Plan(ctx context.Context, opts nodeimage.Options) ([]Planned, error) {
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
func Build(ctx context.Context, opts nodeimage.Options) (*nodeimage.Manifest, error) {
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
	b.stages = append(b.stages, nodeimage.Stage{Name: name, Seconds: time.Since(start).Seconds()})
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
