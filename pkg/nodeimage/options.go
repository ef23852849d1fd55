package nodeimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/drivers"
)

// Source is where binaries and images come from.
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
func (o *Options) Validate() error {
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

// Kernel is a Linux kernel a root's second stage runs in, once: the
// Docker engine (internal/nodeimage/build's DockerKernel, the default), or
// WSL 2 on a Windows host without one (which stage2.Choose sets).
type Kernel interface {
	// Name returns where stage 2 runs, for messages.
	Name() string
	// Configure makes a throwaway Linux system of root (a tar stream:
	// the stage-1 root with /hwk), runs /bin/sh /hwk/stage2.sh in it as
	// root, with its output to log, and writes the file system the script
	// leaves, as a tar, to out. What it made is gone when it returns,
	// whether it failed or not. kind names the root in messages and
	// names.
	Configure(ctx context.Context, kind string, root io.Reader, log, out io.Writer) error
}
