package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/nodeimage/build"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// installDriver returns the driver that installs Windows images when
// --driver names none: the one that would run Windows nodes here (Hyper-V
// on Windows Pro, VirtualBox on Windows Home, libvirt on Linux).
func installDriver(c *cobra.Command, g *globals) (string, error) {
	d, err := g.registry().Default(c.Context(), runtime.GOOS, config.Windows)
	if err != nil {
		return "", fmt.Errorf("%w\n  or name the driver with --driver", err)
	}
	return d.Name(), nil
}

// programsDir returns where hwk's Windows programs ship: beside the hwk
// executable, in windows-amd64/.
func programsDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "windows-amd64"
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return filepath.Join(filepath.Dir(exe), "windows-amd64")
}

func newNodeImageBuildWindowsCommand(g *globals, s Streams) *cobra.Command {
	opts := nodeimage.WindowsOptions{}
	var source, formats, driver string
	cmd := &cobra.Command{
		Use:   "windows --iso PATH",
		Short: "Build the Windows node image from a Windows Server ISO, once",
		Long: `Build the Windows node image from your Windows Server ISO. Windows Server
images cannot be redistributed, so hwk installs Windows once, unattended, in
a VM of the driver you pick, and caches the disk it leaves; every cluster
then boots a copy-on-write clone of it.

The guest downloads nothing. On this host hwk builds (--source source) or
downloads (--source release, checked against published checksums) the
Windows kubelet, kubeadm, kube-proxy, containerd with its runhcs shim and
crictl, pulls the Windows container images (pause, Calico for Windows,
kube-proxy) from their registries or takes them from --image-archive, and
puts them on a build disk with the answer file and provision.ps1.

The ISO's Windows is installed as it is, and the install VM has no network:
--updates DIR installs the update packages in DIR (the latest cumulative
update for the release, from the Microsoft Update Catalog) with DISM before
anything else, restarting for each that needs it. The image's manifest
records the build and revision it ends on (20348.169 is the unpatched Server
2022 evaluation ISO) and the updates that went in.

The install takes 20-40 minutes with hardware virtualization (much longer
under emulation, and a cumulative update adds 20-60); its progress lines
come from the guest's serial console.
Results are cached by every input: building again with nothing changed is a
lookup. The image's Administrator password is random and kept only in the
image's manifest (mode 0600).`,
		Example: `  hwk node-image build windows --iso ~/Downloads/SERVER_EVAL_x64FRE_en-us.iso \
      --openssh ~/Downloads/OpenSSH-Win64.zip --updates ~/Downloads/server2022-updates
  hwk node-image build windows --iso server2025.iso --version 2025 --formats vhdx`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Source = nodeimage.Source(source)
			opts.Formats = splitFormats(formats)
			if formats == "" {
				// Chosen below, once the install's driver is known.
				opts.Formats = nodeimage.WindowsFormats
			}
			opts.CacheDir = state.DefaultDirs().Cache
			// Bad flags are reported before the driver is touched.
			if err := opts.Validate(); err != nil {
				return err
			}
			if driver == "" {
				var err error
				if driver, err = installDriver(c, g); err != nil {
					return err
				}
			}
			opts.DriverName = driver
			d, err := g.registry().Get(driver)
			if err != nil {
				return fmt.Errorf("--driver: %w", err)
			}
			inst, ok := d.(drivers.Installer)
			if !ok {
				can := installers(g.registry())
				if len(can) == 0 {
					return fmt.Errorf("--driver %s cannot install Windows images, and no driver in this hwk can", driver)
				}
				return fmt.Errorf("--driver %s cannot install Windows images; use one of: %s", driver, strings.Join(can, ", "))
			}
			opts.Installer = inst
			if formats == "" {
				opts.Formats = nodeimage.DefaultWindowsFormats(nodeimage.Format(inst.InstallFormat()))
			}
			status := g.newStatus(s)
			if err := status.Step("Check driver "+driver, func() error {
				_, err := d.Preflight(c.Context())
				return err
			}); err != nil {
				return err
			}
			opts.Step = status.Step
			log, closeLog, err := buildLog(opts.CacheDir)
			if err != nil {
				return err
			}
			defer closeLog()
			opts.Log = g.buildOutput(log, status, s)
			// The guest's progress is the spinner's detail on a terminal,
			// and a line of its own in a log.
			opts.Progress = func(line string) {
				if status.Terminal() {
					status.Detail(line)
				} else if !g.quiet {
					fmt.Fprintln(s.ErrOut, "  guest: "+line)
				}
			}
			start := time.Now()
			m, err := build.BuildWindows(c.Context(), opts)
			if err != nil {
				return fmt.Errorf("%w\n(full build log: %s)", err, log.Name())
			}
			fmt.Fprintf(s.Out, "Node image %s (%s) ready in %s\n", m.Name, m.Components["windows"], ui.FormatDuration(time.Since(start)))
			printArtifacts(s.Out, m)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.ISO, "iso", "", "the Windows Server installation ISO (required)")
	f.StringVar(&opts.Version, "version", config.DefaultWindowsVersion, "Windows Server release on the ISO: 2022 or 2025 (experimental)")
	f.StringVar(&opts.Edition, "edition", "", "install.wim edition to install, by its name or the name DISM shows (default: Datacenter Server Core)")
	f.StringVar(&driver, "driver", "", "driver whose VM runs the install: hyperv, virtualbox or libvirt (default: the one that runs Windows nodes here, see 'hwk get drivers')")
	f.StringVar(&opts.KubernetesVersion, "kubernetes-version", config.DefaultKubernetesVersion, "Kubernetes version to build the image for")
	f.StringVar(&source, "source", string(nodeimage.Release), "where the Windows binaries come from: release (official downloads) or source (built from the Go module proxy)")
	f.StringVar(&formats, "formats", "", "comma-separated disk formats to make: qcow2 (libvirt), vhdx (Hyper-V), vdi (VirtualBox) (default: all three where qemu-img is installed to convert the disk, else the install driver's own)")
	f.StringVar(&opts.OpenSSH, "openssh", "", "Win32-OpenSSH's OpenSSH-Win64.zip (required for 2022, whose ISO has no OpenSSH server)")
	f.StringVar(&opts.Updates, "updates", "", "directory of Windows update packages (.msu, .cab) to install in the image, in file-name order: the latest cumulative update from the Microsoft Update Catalog (the evaluation ISO is unpatched)")
	f.StringSliceVar(&opts.ImageArchives, "image-archive", nil, "image archive (docker save or OCI layout) holding Windows images, used instead of pulling them; repeatable")
	f.StringVar(&opts.Programs, "programs", programsDir(), "directory with hwk's Windows programs (hwk-seed.exe, hwk-kubelet.exe)")
	f.IntVar(&opts.CPUs, "cpus", 2, "CPUs of the install VM")
	f.Int64Var(&opts.MemoryBytes, "memory-mib", 4096, "memory of the install VM, in MiB")
	f.Int64Var(&opts.DiskSize, "disk-gib", nodeimage.DefaultWindowsDiskSize>>30, "virtual size of the image's disk, in GiB")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if opts.MemoryBytes < 2048 {
			return fmt.Errorf("--memory-mib %d: Windows Setup needs at least 2048", opts.MemoryBytes)
		}
		if opts.DiskSize < 32 {
			return fmt.Errorf("--disk-gib %d: Windows Server needs at least 32", opts.DiskSize)
		}
		opts.MemoryBytes <<= 20
		opts.DiskSize <<= 30
		return nil
	}
	return cmd
}

// installers lists the drivers that can install Windows images.
func installers(r *drivers.Registry) []string {
	var out []string
	for _, n := range r.Names() {
		if d, err := r.Get(n); err == nil {
			if _, ok := d.(drivers.Installer); ok {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}
