package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/internal/nodeimage/winimage"
	"github.com/hwk-dev/hwk/node-images/windows"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// windowsImage is one entry of images/windows.yaml.
type windowsImage struct {
	Name     string `yaml:"name"`
	Tag      string `yaml:"tag"`
	Manifest string `yaml:"manifest"`
	Sandbox  bool   `yaml:"sandbox"`
	// HostProcess images run on the host itself, so any Windows build
	// of them does.
	HostProcess bool `yaml:"hostProcess"`
}

// windowsRecipe reads node-images/windows/components.yaml and
// images/windows.yaml.
func windowsRecipe() (*recipe, []windowsImage, error) {
	var r recipe
	data, err := fs.ReadFile(windows.Recipe, "components.yaml")
	if err != nil {
		return nil, nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&r); err != nil {
		return nil, nil, fmt.Errorf("recipe node-images/windows/components.yaml: %w", err)
	}
	var list struct {
		Images []windowsImage `yaml:"images"`
	}
	data, err = images.Manifests.ReadFile("windows.yaml")
	if err != nil {
		return nil, nil, err
	}
	dec = yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&list); err != nil {
		return nil, nil, fmt.Errorf("images/windows.yaml: %w", err)
	}
	return &r, list.Images, nil
}

// windowsBuilder carries one Windows build.
type windowsBuilder struct {
	*builder
	w       nodeimage.WindowsOptions
	edition winimage.Edition
	isoSum  string
	images  []windowsImage
	// pulled are the image archives for the build disk.
	pulled []builtImage
	work   string
	// updates are --updates' packages, in the order they go in.
	updates []string
}

// BuildWindows makes (or finds in the cache) the Windows node image: it
// reads the ISO's editions, builds or downloads the Windows binaries,
// pulls the Windows container images, writes the build disk, installs
// Windows from the ISO in a VM of opts.Installer's driver, and converts
// the disk it leaves to every format asked for.
func BuildWindows(ctx context.Context, opts nodeimage.WindowsOptions) (*nodeimage.Manifest, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Installer == nil {
		return nil, errors.New("no driver to install Windows with")
	}
	r, list, err := windowsRecipe()
	if err != nil {
		return nil, err
	}
	wb := &windowsBuilder{w: opts, images: list, builder: &builder{
		opts: nodeimage.Options{KubernetesVersion: opts.KubernetesVersion, Source: opts.Source, CacheDir: opts.CacheDir,
			Step: opts.Step, Log: opts.Log, HTTP: opts.HTTP},
		recipe: r, goos: "windows", bins: map[string]string{},
	}}
	if opts.Source == nodeimage.FromSource {
		if wb.goVer, err = goVersion(ctx); err != nil {
			return nil, err
		}
	}
	err = wb.step("Read the editions of "+filepath.Base(opts.ISO), func() error {
		eds, err := winimage.ISOEditions(opts.ISO)
		if err != nil {
			return err
		}
		wb.edition, err = winimage.ChooseEdition(eds, opts.Version, opts.Edition)
		return err
	})
	if err != nil {
		return nil, err
	}
	err = wb.step("Checksum "+filepath.Base(opts.ISO), func() error {
		wb.isoSum, _, err = fileSHA256(opts.ISO)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := wb.windowsKeys(); err != nil {
		return nil, err
	}
	wb.dir = filepath.Join(opts.CacheDir, "node-images", wb.windowsName())
	if m, err := nodeimage.ReadManifest(wb.dir); err == nil && m.Key == wb.keys["node"] && wb.hasFormats(m) {
		return m, opts.Step(fmt.Sprintf("Cached node image %s", m.Name), func() error { return nil })
	}
	if err := os.MkdirAll(wb.dir, 0o755); err != nil {
		return nil, fmt.Errorf("node image cache: %w", err)
	}
	wb.work, err = os.MkdirTemp(opts.CacheDir, "windows-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(wb.work)

	m := &nodeimage.Manifest{Dir: wb.dir, Artifacts: map[nodeimage.Format]nodeimage.Artifact{}}
	for _, s := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"binaries", wb.binaries},
		{"images", wb.windowsImages},
		{"install", func(ctx context.Context) error { return wb.install(ctx, m) }},
		{"formats", func(ctx context.Context) error { return wb.formats(ctx, m) }},
	} {
		if err := wb.stage(s.name, func() error { return s.run(ctx) }); err != nil {
			return nil, err
		}
	}
	return m, wb.finishWindows(m)
}

func (wb *windowsBuilder) hasFormats(m *nodeimage.Manifest) bool {
	for _, f := range wb.w.Formats {
		if !m.Has(context.Background(), f, nil) {
			return false
		}
	}
	return true
}

// windowsKeys keys the image on everything that goes into it: the ISO
// and edition, the recipe, each component, the image list, OpenSSH,
// hwk's Windows programs and any image archives.
func (wb *windowsBuilder) windowsKeys() error {
	comps, err := wb.componentKeys()
	if err != nil {
		return err
	}
	recipeSum, err := hashFS(windows.Recipe)
	if err != nil {
		return err
	}
	list, err := images.Manifests.ReadFile("windows.yaml")
	if err != nil {
		return err
	}
	files := map[string]string{}
	for _, p := range append([]string{wb.w.OpenSSH, filepath.Join(wb.w.Programs, "hwk-seed.exe"), filepath.Join(wb.w.Programs, "hwk-kubelet.exe")}, wb.w.ImageArchives...) {
		if p == "" {
			continue
		}
		sum, _, err := fileSHA256(p)
		if err != nil {
			return err
		}
		files[filepath.Base(p)] = sum
	}
	// The updates by name and content; their order is their names'.
	if wb.w.Updates != "" {
		if wb.updates, err = nodeimage.UpdateFiles(wb.w.Updates); err != nil {
			return err
		}
	}
	for _, p := range wb.updates {
		sum, _, err := fileSHA256(p)
		if err != nil {
			return fmt.Errorf("--updates: %w", err)
		}
		files["updates/"+filepath.Base(p)] = sum
	}
	wb.keys["node"] = hashJSON([]any{"windows", recipeSum, string(list), comps, wb.isoSum, wb.w.Version, wb.edition.Name,
		files, wb.w.KubernetesVersion, wb.w.Source, wb.w.DiskSize})
	return nil
}

func (wb *windowsBuilder) windowsName() string {
	return fmt.Sprintf("windows-%s-%s-%s-%s", wb.w.Version, wb.w.KubernetesVersion, wb.w.Source, wb.keys["node"][:12])
}

// build returns the Windows build the image installs.
func (wb *windowsBuilder) build() int {
	return map[string]int{"2022": 20348, "2025": 26100}[wb.w.Version]
}

// finishWindows fills in and writes the manifest (0600: it holds the
// Administrator password).
func (wb *windowsBuilder) finishWindows(m *nodeimage.Manifest) error {
	m.Name, m.OS = filepath.Base(wb.dir), "windows"
	m.KubernetesVersion, m.Source, m.Key = wb.w.KubernetesVersion, wb.w.Source, wb.keys["node"]
	m.Built = time.Now().UTC().Truncate(time.Second)
	m.Components = map[string]string{"windows": fmt.Sprintf("%s (build %s)", wb.edition.Name, m.Windows.BuildString())}
	if wb.goVer != "" {
		m.Components["go"] = wb.goVer
	}
	if err := wb.recordBinaries(m); err != nil {
		return err
	}
	for _, im := range wb.pulled {
		m.Images = append(m.Images, im.Image)
	}
	m.Stages = wb.stages
	return m.Write()
}
