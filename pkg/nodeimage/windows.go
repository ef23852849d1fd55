package nodeimage

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/drivers"
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
	// Source is where the binaries come from. The Windows container
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

// DefaultInstallBudgets are the budgets of a build that names none; they
// fit a slow laptop.
// Server 2022's Setup on two vCPUs and a spinning disk takes about half an
// hour; an update on the RTM build outlasts the rest of phase 1.
var DefaultInstallBudgets = InstallBudgets{Setup: 90 * time.Minute, Phase1: 45 * time.Minute, Phase2: 90 * time.Minute, Sysprep: 30 * time.Minute, Update: 90 * time.Minute}

// DefaultWindowsDiskSize is the Windows image's virtual size in bytes.
const DefaultWindowsDiskSize = 40 << 30 // Why: Server Core with containerd and the images takes about 12 GiB.

// Validate checks the options a user gives, before anything is read or
// written.
func (o *WindowsOptions) Validate() error {
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
		if _, err := UpdateFiles(o.Updates); err != nil {
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

// updateNameRE matches the update package file names hwk takes: the
// Microsoft Update Catalog's (windows10.0-kb5044281-x64_<hash>.msu) and
// any other of letters, digits and ._+-, with no spaces.
// Such names pass through the build disk, build.json and DISM's command
// line unquoted and unchanged.
var updateNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*\.(?i:msu|cab)$`)

// UpdateFiles returns the update packages (.msu, .cab) in dir, in the
// order they are installed: by file name, case ignored, as Windows sorts
// them; other files are left out. A directory with no package, or a
// package whose name hwk cannot pass on, is an error that gives the fix.
func UpdateFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--updates %s: %w (name a directory holding the .msu files from the Microsoft Update Catalog)", dir, err)
	}
	var out []string
	seen := map[string]string{}
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".msu" && ext != ".cab") {
			continue
		}
		if !updateNameRE.MatchString(e.Name()) {
			return nil, fmt.Errorf("--updates: %q is not a name hwk can pass to DISM: rename it to letters, digits and . _ + - only, no spaces (the Update Catalog's own names, such as windows10.0-kb5044281-x64.msu, are fine)", e.Name())
		}
		lower := strings.ToLower(e.Name())
		if other, ok := seen[lower]; ok {
			return nil, fmt.Errorf("--updates: %s and %s are the same name to Windows; keep one", other, e.Name())
		}
		seen[lower] = e.Name()
		out = append(out, filepath.Join(dir, e.Name()))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--updates %s holds no .msu or .cab file: download the latest cumulative update for the Windows Server release (for 2022: \"Cumulative Update for Microsoft server operating system version 21H2 for x64-based Systems\") from https://www.catalog.update.microsoft.com into it", dir)
	}
	// Why name order is enough: servicing stack updates come inside
	// Windows Server 2022's cumulative updates since 2021, so its latest
	// cumulative update alone is enough; a separate servicing stack update
	// must be named so that it sorts first.
	slices.SortFunc(out, func(a, b string) int {
		return strings.Compare(strings.ToLower(filepath.Base(a)), strings.ToLower(filepath.Base(b)))
	})
	return out, nil
}

// DefaultWindowsFormats returns the formats a Windows image is built in
// when none are named: every one where qemu-img can convert the installed
// disk, else only install, the format the install VM's driver writes (and
// boots).
func DefaultWindowsFormats(install Format) []Format {
	if _, err := exec.LookPath("qemu-img"); err == nil {
		return slices.Clone(WindowsFormats)
	}
	return []Format{install}
}
