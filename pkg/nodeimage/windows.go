package nodeimage

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/images"
	windows "github.com/hwk-dev/hwk/node-images/windows"
	"github.com/hwk-dev/hwk/pkg/winimage"
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
	// Sysprep runs from "phase 2: sysprep" to the power-off.
	Sysprep time.Duration
}

// DefaultInstallBudgets fit a slow laptop: a Server 2022 Setup on two
// vCPUs and a spinning disk takes about half an hour.
var DefaultInstallBudgets = InstallBudgets{Setup: 90 * time.Minute, Phase1: 45 * time.Minute, Phase2: 90 * time.Minute, Sysprep: 30 * time.Minute}

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

// install writes the build disk and runs the install VM.
func (wb *windowsBuilder) install(ctx context.Context, m *Manifest) error {
	password, err := winimage.NewPassword()
	if err != nil {
		return err
	}
	in := winimage.BuildInputs{
		// The language is the edition's: Setup stops to ask when the
		// answer file names one the media lacks.
		Unattend:          winimage.UnattendOptions{Version: wb.w.Version, Edition: wb.edition.Name, AdminPassword: password, Locale: wb.edition.Language},
		KubernetesVersion: wb.w.KubernetesVersion,
		ContainerdVersion: wb.recipe.component("containerd").Version,
		HwkSeed:           filepath.Join(wb.w.Programs, "hwk-seed.exe"),
		HwkKubelet:        filepath.Join(wb.w.Programs, "hwk-kubelet.exe"),
	}
	for key, p := range wb.bins {
		switch {
		case strings.HasPrefix(key, "kubernetes/"):
			in.Kubernetes = append(in.Kubernetes, p)
		case strings.HasPrefix(key, "containerd/"), strings.HasPrefix(key, "hcsshim/"):
			in.Containerd = append(in.Containerd, p)
		case key == "crictl/crictl.exe":
			in.Crictl = p
		}
	}
	slices.Sort(in.Kubernetes)
	slices.Sort(in.Containerd)
	for i, im := range wb.pulled {
		in.Images = append(in.Images, im.Path)
		if wb.images[i].Sandbox {
			in.PauseImage = im.Ref
		}
	}
	if wb.w.OpenSSH != "" {
		dir := filepath.Join(wb.work, "openssh")
		if err := unzipOpenSSH(wb.w.OpenSSH, dir); err != nil {
			return fmt.Errorf("--openssh %s: %w", wb.w.OpenSSH, err)
		}
		in.OpenSSHDir = dir
	}
	disk := filepath.Join(wb.work, "build.iso")
	if err := wb.step("Write the build disk", func() error { return winimage.BuildDisk(disk, in) }); err != nil {
		return err
	}
	m.Windows = &Windows{Version: wb.w.Version, Edition: wb.edition.Name, Build: wb.edition.Build, ISOSHA256: wb.isoSum, AdminPassword: password}

	console := filepath.Join(wb.dir, "install-console.log")
	// A retry of the same build has the same directory: an earlier
	// attempt's log (some drivers append to it) would be read as this
	// one's, its FAILED line winning over this one's done. It is kept
	// beside, as the last attempt's.
	if err := os.Rename(console, console+".prev"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("keep the last attempt's console log: %w", err)
	}
	spec := drivers.InstallSpec{
		Name:        "hwk-build-" + wb.keys["node"][:10],
		Media:       []string{wb.w.ISO, disk},
		PressKey:    true,
		Disk:        filepath.Join(wb.work, "disk."+wb.w.Installer.InstallFormat()),
		DiskBytes:   wb.w.DiskSize,
		CPUs:        wb.w.CPUs,
		MemoryBytes: wb.w.MemoryBytes,
		ConsoleLog:  console,
	}
	label := fmt.Sprintf("Install Windows Server %s (%s) in a %s VM", wb.w.Version, wb.edition.Name, wb.w.DriverName)
	return wb.step(label, func() error {
		ictx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		dog := newWatchdog(wb.w.Budgets, console, spec.Name, wb.w.DriverName, cancel)
		stop := wb.follow(console, dog.saw)
		err := wb.w.Installer.Install(ictx, spec)
		stop()
		dog.stop()
		var stalled *stalledError
		if errors.As(context.Cause(ictx), &stalled) {
			return stalled
		}
		if err != nil {
			return err
		}
		return provisionResult(console)
	})
}

// watchdog stops an install whose current phase has outlived its budget.
type watchdog struct {
	budgets          InstallBudgets
	console, vm, drv string
	cancel           context.CancelCauseFunc
	mu               sync.Mutex
	phase            string
	since            time.Time
	last             string
	done             chan struct{}
}

func newWatchdog(b InstallBudgets, console, vm, driver string, cancel context.CancelCauseFunc) *watchdog {
	d := DefaultInstallBudgets
	b.Setup, b.Phase1, b.Phase2, b.Sysprep = cmp.Or(b.Setup, d.Setup), cmp.Or(b.Phase1, d.Phase1), cmp.Or(b.Phase2, d.Phase2), cmp.Or(b.Sysprep, d.Sysprep)
	w := &watchdog{budgets: b, console: console, vm: vm, drv: driver, cancel: cancel, phase: "Windows Setup", since: time.Now(), done: make(chan struct{})}
	go w.run()
	return w
}

// phaseOf is the install phase a progress line belongs to.
func phaseOf(line string) string {
	switch {
	case strings.HasPrefix(line, "phase 2: sysprep"), strings.HasPrefix(line, "done:"):
		return "sysprep"
	case strings.HasPrefix(line, "phase 2"):
		return "phase 2"
	}
	return "phase 1"
}

func (w *watchdog) budget(phase string) time.Duration {
	return map[string]time.Duration{"Windows Setup": w.budgets.Setup, "phase 1": w.budgets.Phase1, "phase 2": w.budgets.Phase2, "sysprep": w.budgets.Sysprep}[phase]
}

// saw takes a progress line (without its prefix).
func (w *watchdog) saw(line string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = line
	if strings.HasPrefix(line, "FAILED:") || strings.HasPrefix(line, "the full log") {
		return // the guest's failure report: it powers off next
	}
	if p := phaseOf(line); p != w.phase {
		w.phase, w.since = p, time.Now()
	}
}

func (w *watchdog) run() {
	tick := time.NewTicker(min(w.budgets.Setup, w.budgets.Phase1, w.budgets.Phase2, w.budgets.Sysprep, time.Minute) / 4)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-tick.C:
		}
		w.mu.Lock()
		var stalled *stalledError
		if budget := w.budget(w.phase); time.Since(w.since) > budget {
			stalled = &stalledError{phase: w.phase, budget: budget, last: w.last, console: w.console, vm: w.vm, driver: w.drv}
		}
		w.mu.Unlock()
		if stalled != nil {
			w.cancel(stalled)
			return
		}
	}
}

func (w *watchdog) stop() { close(w.done) }

// stalledError is an install phase that outlived its budget.
type stalledError struct {
	phase, last, console, vm, driver string
	budget                           time.Duration
}

func (e *stalledError) Error() string {
	last := "none yet"
	if e.last != "" {
		last = fmt.Sprintf("%q", e.last)
	}
	where := map[string]string{
		"Windows Setup": `Setup's own logs are in X:\Windows\Panther (while it runs from the ISO) and C:\Windows\Panther on the disk`,
		"phase 1":       `the guest's logs are C:\hwk-firstlogon.log and C:\hwk-provision.log`,
		"phase 2":       `the guest's log is C:\hwk-provision.log`,
		"sysprep":       `sysprep's logs are in C:\Windows\System32\Sysprep\Panther`,
	}[e.phase]
	watch := map[string]string{"hyperv": "vmconnect localhost " + e.vm, "virtualbox": `VirtualBox's window for "` + e.vm + `"`, "libvirt": "virt-viewer " + e.vm}[e.driver]
	if watch == "" {
		watch = "the VM's screen"
	}
	return fmt.Sprintf("the install stopped: %s took longer than %s (the last progress line: %s)\n  console: %s; %s\n  fix: run the build again and watch the VM's screen (%s) to see where it waits",
		e.phase, e.budget, last, e.console, where, watch)
}

// follow passes the guest's progress lines from its console log to the
// build log and Progress as they appear; the returned func stops it
// after a last read.
func (wb *windowsBuilder) follow(console string, saw func(string)) func() {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var off int64
		var part string
		read := func() {
			f, err := os.Open(console)
			if err != nil {
				return
			}
			defer f.Close()
			if st, err := f.Stat(); err == nil && st.Size() < off {
				off = 0 // the log was started again
			}
			data, err := io.ReadAll(io.NewSectionReader(f, off, 1<<40))
			if err != nil {
				return
			}
			off += int64(len(data))
			lines := strings.Split(part+string(data), "\n")
			part = lines[len(lines)-1]
			for _, l := range lines[:len(lines)-1] {
				l = strings.TrimSpace(l)
				if strings.HasPrefix(l, progressPrefix) {
					fmt.Fprintln(wb.opts.Log, l)
					wb.w.Progress(strings.TrimPrefix(l, progressPrefix))
					saw(strings.TrimPrefix(l, progressPrefix))
				}
			}
		}
		for {
			select {
			case <-done:
				read()
				return
			case <-time.After(time.Second):
				read()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// progressPrefix starts every line provision.ps1 writes to COM1.
const progressPrefix = "hwk-provision: "

// provisionResult reads how provisioning ended from the console log: the
// guest powers off after a failure too, having said why.
func provisionResult(console string) error {
	f, err := os.Open(console)
	if err != nil {
		return fmt.Errorf("the install VM's console log: %w", err)
	}
	defer f.Close()
	var last, failed string
	ok := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		rest, found := strings.CutPrefix(l, progressPrefix)
		if !found {
			continue
		}
		last = rest
		switch {
		case strings.HasPrefix(rest, "FAILED:"):
			failed = rest
		case strings.HasPrefix(rest, "done:"):
			ok = true
		}
	}
	switch {
	case failed != "":
		return fmt.Errorf("provisioning in the guest %s\n  (console: %s; the guest's full log is C:\\hwk-provision.log on the disk)", failed, console)
	case !ok && last == "":
		return fmt.Errorf("the install VM powered off without provisioning: Windows Setup never ran provision.ps1 (wrong edition or answer file?); console: %s", console)
	case !ok:
		return fmt.Errorf("the install VM powered off before provisioning finished; its last step was %q (console: %s)", last, console)
	}
	return nil
}

// formats converts the installed disk to every format asked for; the
// install's own format is the installed disk itself, moved last, so that
// a host without qemu-img (a Windows laptop) can build the one format its
// driver boots.
func (wb *windowsBuilder) formats(ctx context.Context, m *Manifest) error {
	from := Format(wb.w.Installer.InstallFormat())
	src := filepath.Join(wb.work, "disk."+string(from))
	order := slices.Clone(wb.w.Formats)
	slices.SortStableFunc(order, func(a, b Format) int {
		return boolInt(a == from) - boolInt(b == from)
	})
	for _, f := range order {
		dst := filepath.Join(wb.dir, "disk."+string(f))
		label, convert := "Convert the disk to "+string(f), func() error { return convertDisk(ctx, wb.opts.Log, src, string(from), dst, f) }
		if f == from {
			label, convert = "Keep the disk as "+string(f), func() error { return os.Rename(src, dst) }
		}
		err := wb.step(label, func() error {
			if err := convert(); err != nil {
				return err
			}
			return wb.record(m, f, dst)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// DefaultWindowsFormats are the formats a Windows image is built in when
// none are named: every one where qemu-img can convert the installed disk,
// else only install, the format the install VM's driver writes (and
// boots).
func DefaultWindowsFormats(install Format) []Format {
	if _, err := exec.LookPath("qemu-img"); err == nil {
		return slices.Clone(WindowsFormats)
	}
	return []Format{install}
}

// qemuFormat is qemu-img's name and options for each disk format: VHDX
// dynamic (Hyper-V's differencing disks need a dynamic or fixed parent),
// VDI dynamic, qcow2 compact.
var qemuFormat = map[Format][]string{
	FormatQCOW2: {"-O", "qcow2"},
	FormatVHDX:  {"-O", "vhdx", "-o", "subformat=dynamic"},
	FormatVDI:   {"-O", "vdi"},
}

// convertDisk writes src (of format from) as dst in format to, through a
// temporary file.
func convertDisk(ctx context.Context, log io.Writer, src, from string, dst string, to Format) error {
	args := append([]string{"convert", "-f", from}, qemuFormat[to]...)
	args = append(args, src, dst+".tmp")
	cmd := exec.CommandContext(ctx, "qemu-img", args...)
	tail := &tailWriter{max: 20}
	cmd.Stdout, cmd.Stderr = io.MultiWriter(log, tail), io.MultiWriter(log, tail)
	if err := cmd.Run(); err != nil {
		os.Remove(dst + ".tmp")
		if errors.Is(err, exec.ErrNotFound) {
			return fmt.Errorf("converting disks needs qemu-img (Debian: apt-get install qemu-utils; Windows: QEMU for Windows)")
		}
		return fmt.Errorf("qemu-img convert to %s: %w\n%s", to, err, tail)
	}
	return os.Rename(dst+".tmp", dst)
}

// finishWindows fills in and writes the manifest (0600: it holds the
// Administrator password).
func (wb *windowsBuilder) finishWindows(m *Manifest) error {
	m.Name, m.OS = filepath.Base(wb.dir), "windows"
	m.KubernetesVersion, m.Source, m.Key = wb.w.KubernetesVersion, wb.w.Source, wb.keys["node"]
	m.Built = time.Now().UTC().Truncate(time.Second)
	m.Components = map[string]string{"windows": fmt.Sprintf("%s (build %d)", wb.edition.Name, wb.edition.Build)}
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
