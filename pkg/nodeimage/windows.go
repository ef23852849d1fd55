package nodeimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/internal/winimage"
	windows "github.com/hwk-dev/hwk/node-images/windows"
)

// WindowsFormats are the disk formats a Windows node image comes in.
var WindowsFormats = []Format{FormatQCOW2, FormatVHDX, FormatVDI}

// WindowsOptions for BuildWindows.
type WindowsOptions struct {
	// ISO is the user's Windows Server installation ISO.
	ISO string
	// Version is the Windows Server release, "2022" or "2025".
	Version string
	// Edition names the install.wim image; empty picks Datacenter
	// Server Core.
	Edition           string
	KubernetesVersion string
	// Source says where the binaries come from. The Windows container
	// images are pulled from their registries either way (no Windows
	// image can be built here), unless ImageArchives hold them.
	Source  Source
	Formats []Format
	// Installer runs the install VM; DriverName names it in messages.
	Installer  drivers.Installer
	DriverName string
	// OpenSSH is Win32-OpenSSH's OpenSSH-Win64.zip, which Windows Server
	// 2022 needs (its own sshd is a Feature on Demand downloaded from
	// Windows Update, which the offline build cannot reach).
	OpenSSH string
	// ImageArchives are image archives (docker save, OCI layout) holding
	// the Windows images, for hosts that cannot reach their registries.
	ImageArchives []string
	// Updates is a directory of Windows update packages (.msu, .cab, as
	// the Microsoft Update Catalog has them), installed in file-name
	// order in the install VM; empty installs none.
	Updates string
	// Programs is the directory with hwk's Windows programs,
	// hwk-seed.exe and hwk-kubelet.exe.
	Programs string
	CacheDir string
	// DiskSize is the image's virtual size; CPUs and MemoryBytes the
	// install VM's.
	DiskSize    int64
	CPUs        int
	MemoryBytes int64
	Step        func(name string, fn func() error) error
	Log         io.Writer
	HTTP        *http.Client
	// Progress receives each progress line the guest writes to its
	// serial console while it installs.
	Progress func(line string)
	// Budgets bound each phase of the install; zero ones are
	// DefaultInstallBudgets'.
	Budgets InstallBudgets
}

// InstallBudgets are how long each phase of a Windows image's install
// may take before the build stops it: a stuck Setup page or a sysprep
// that never powers the VM off would otherwise keep the build waiting
// forever, saying nothing.
type InstallBudgets struct {
	// Setup runs from the VM's start to provision.ps1's first line
	// (Windows Setup copies and expands the image, then reboots twice).
	Setup time.Duration
	// Phase1 and Phase2 are provision.ps1's phases (phase 1 ends with a
	// restart; phase 2 imports the container images).
	Phase1, Phase2 time.Duration
	// Update is each update's install and its restart.
	Update time.Duration
	// Sysprep runs from "phase 2: sysprep" to the power-off.
	Sysprep time.Duration
}

// DefaultInstallBudgets fit a slow laptop: a Server 2022 Setup on two
// vCPUs and a spinning disk takes about half an hour.
// A cumulative update on the RTM build takes longer than the rest of
// phase 1.
var DefaultInstallBudgets = InstallBudgets{Setup: 90 * time.Minute, Phase1: 45 * time.Minute, Phase2: 90 * time.Minute, Sysprep: 30 * time.Minute, Update: 90 * time.Minute}

// DefaultWindowsDiskSize is the Windows image's virtual size: Server Core
// with containerd and the images takes about 12 GiB.
const DefaultWindowsDiskSize = 40 << 30

// Validate checks the options a user gives, before anything is touched.
func (o *WindowsOptions) Validate() error { return o.validate() }

// validate checks the options before anything is read or written.
func (o *WindowsOptions) validate() error {
	var errs []string
	if o.ISO == "" {
		errs = append(errs, "--iso is required: a Windows Server 2022 or 2025 ISO (the evaluation ISO from Microsoft's Evaluation Center works)")
	} else if st, err := os.Stat(o.ISO); err != nil || st.IsDir() {
		errs = append(errs, fmt.Sprintf("--iso %s: not a file (%v)", o.ISO, err))
	}
	if o.Version != "2022" && o.Version != "2025" {
		errs = append(errs, fmt.Sprintf("--version %q: use 2022 or 2025", o.Version))
	}
	if !kubernetesVersion.MatchString(o.KubernetesVersion) {
		errs = append(errs, fmt.Sprintf("--kubernetes-version %q is not a Kubernetes release; use a full version such as v1.35.4", o.KubernetesVersion))
	}
	if o.Source != Release && o.Source != FromSource {
		errs = append(errs, fmt.Sprintf("--source %q: use release or source", o.Source))
	}
	if len(o.Formats) == 0 {
		errs = append(errs, "--formats is empty; name at least one of qcow2, vhdx, vdi")
	}
	for _, f := range o.Formats {
		if !slices.Contains(WindowsFormats, f) {
			errs = append(errs, fmt.Sprintf("--formats: a Windows image is a disk; %q is not one of qcow2, vhdx, vdi", f))
		}
	}
	if o.Version == "2022" && o.OpenSSH == "" {
		errs = append(errs, "--openssh is required for Windows Server 2022, whose OpenSSH server is not on its ISO: download OpenSSH-Win64.zip from https://github.com/PowerShell/Win32-OpenSSH/releases and pass its path")
	}
	for _, p := range append([]string{o.OpenSSH}, o.ImageArchives...) {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if o.Updates != "" {
		if _, err := updateFiles(o.Updates); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for _, exe := range []string{"hwk-seed.exe", "hwk-kubelet.exe"} {
		if _, err := os.Stat(filepath.Join(o.Programs, exe)); err != nil {
			errs = append(errs, fmt.Sprintf("hwk's Windows program %s is not in %s: it ships beside hwk (`make build` puts it in bin/windows-amd64)", exe, o.Programs))
		}
	}
	if o.CacheDir == "" {
		errs = append(errs, "no cache directory")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	if o.DiskSize == 0 {
		o.DiskSize = DefaultWindowsDiskSize
	}
	if o.CPUs == 0 {
		o.CPUs = 2
	}
	if o.MemoryBytes == 0 {
		o.MemoryBytes = 4 << 30
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Step == nil {
		o.Step = func(_ string, fn func() error) error { return fn() }
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	return nil
}

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
	w       WindowsOptions
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
func BuildWindows(ctx context.Context, opts WindowsOptions) (*Manifest, error) {
	if err := opts.validate(); err != nil {
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
		opts: Options{KubernetesVersion: opts.KubernetesVersion, Source: opts.Source, CacheDir: opts.CacheDir,
			Step: opts.Step, Log: opts.Log, HTTP: opts.HTTP},
		recipe: r, goos: "windows", bins: map[string]string{},
	}}
	if opts.Source == FromSource {
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
	if m, err := readManifest(wb.dir); err == nil && m.Key == wb.keys["node"] && wb.hasFormats(m) {
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

	m := &Manifest{Dir: wb.dir, Artifacts: map[Format]Artifact{}}
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

func (wb *windowsBuilder) hasFormats(m *Manifest) bool {
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
		if wb.updates, err = updateFiles(wb.w.Updates); err != nil {
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

// build is the Windows build the image installs.
func (wb *windowsBuilder) build() int {
	return map[string]int{"2022": 20348, "2025": 26100}[wb.w.Version]
}

// finishWindows fills in and writes the manifest (0600: it holds the
// Administrator password).
func (wb *windowsBuilder) finishWindows(m *Manifest) error {
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
	return m.write()
}
