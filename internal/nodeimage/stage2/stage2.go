package stage2

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/wsl2"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// The values of where besides the drivers that boot kernels.
const (
	Auto   = "auto"
	Docker = "docker"
	WSL    = "wsl2"
)

// Choose sets where the Debian roots' second stage runs (opts.Kernel,
// opts.VM, or neither for the Docker engine) from where (--configure-in):
// Auto, Docker, WSL or a kernel-booting driver of r. Auto takes a Docker
// engine with Linux containers, else WSL 2 on amd64 Windows, else the first
// such driver passing its preflight; else the error names each and its fix.
func Choose(ctx context.Context, opts *nodeimage.Options, where string, r *drivers.Registry) error {
	// Asked once: the engine matters to the docker format, to
	// --configure-in docker and to auto.
	needDocker := slices.Contains(opts.Formats, nodeimage.FormatDocker) || where == Docker
	var dockerErr error
	if needDocker || where == Auto {
		dockerErr = DockerAnswers(ctx, opts.Docker)
	}
	// The docker format goes into the engine whatever configures the
	// root: without one, say so before minutes of building.
	if needDocker && dockerErr != nil {
		if where == Docker {
			return fmt.Errorf("--configure-in docker: %w\n  fix: start Docker, or use --configure-in auto", dockerErr)
		}
		return fmt.Errorf("the docker format goes into a Docker engine: %w\n  fix: start Docker, or leave docker out of --formats (say --formats tar,qcow2)", dockerErr)
	}
	wsl := wsl2.Kernel{Runner: wsl2.CLI{}, Dir: filepath.Join(opts.CacheDir, "build", "wsl")}
	switch where {
	case Docker:
		return nil
	case WSL:
		if runtime.GOOS != "windows" || !nativeAMD64() {
			return fmt.Errorf("--configure-in wsl2: WSL 2 configures the root only on an amd64 Windows (the root is amd64)")
		}
		if err := wsl.Check(ctx); err != nil {
			return fmt.Errorf("--configure-in wsl2: %w", err)
		}
		opts.Kernel = wsl
		return nil
	case Auto:
	default:
		d, err := r.Get(where)
		if err != nil {
			return fmt.Errorf("--configure-in: %w", err)
		}
		vm, ok := d.(drivers.KernelBooter)
		if !ok {
			return fmt.Errorf("--configure-in %s: that driver cannot boot a kernel; use auto, docker, wsl2 or one of: %s", where, strings.Join(kernelBooters(r), ", "))
		}
		opts.VM = vm
		return nil
	}
	if dockerErr == nil {
		return nil
	}
	why := []string{"Docker: " + dockerErr.Error() + "; start Docker (Docker Desktop on Windows and macOS, or dockerd on Linux)"}
	switch {
	// The root is amd64: WSL on an arm64 Windows runs an arm64 kernel.
	case runtime.GOOS == "windows" && nativeAMD64():
		err := wsl.Check(ctx)
		if err == nil {
			opts.Kernel = wsl
			return nil
		}
		why = append(why, "WSL 2: "+reason(err))
	case runtime.GOOS == "windows":
		why = append(why, "WSL 2: only on an amd64 Windows")
	default:
		why = append(why, "WSL 2: only on Windows")
	}
	for _, name := range kernelBooters(r) {
		d, _ := r.Get(name)
		if _, err := drivers.Preflight(ctx, d); err != nil {
			why = append(why, name+": "+reason(err))
			continue
		}
		opts.VM = d.(drivers.KernelBooter)
		return nil
	}
	return fmt.Errorf("no Linux kernel to configure the node's Debian root in; start one of these and build again:\n  %s", strings.Join(why, "\n  "))
}

// reason returns a driver's refusal on one line: its reason and fix.
func reason(err error) string {
	if u, ok := errors.AsType[*drivers.UnavailableError](err); ok {
		if u.Fix != "" {
			return u.Reason + "; " + u.Fix
		}
		return u.Reason
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// DockerAnswers returns why the engine cannot configure a root: it does not
// answer, or it runs Windows containers (Docker Desktop switched).
func DockerAnswers(ctx context.Context, docker func() (client.APIClient, error)) error {
	c, err := docker()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := c.Ping(ctx, client.PingOptions{})
	if err != nil {
		return err
	}
	if p.OSType != "" && p.OSType != "linux" {
		return fmt.Errorf("the engine runs %s containers, switch Docker Desktop to Linux containers", p.OSType)
	}
	return nil
}

// kernelBooters returns the drivers that can boot a kernel for stage 2.
func kernelBooters(r *drivers.Registry) []string {
	var out []string
	for _, n := range r.Names() {
		if d, err := r.Get(n); err == nil {
			if _, ok := d.(drivers.KernelBooter); ok {
				out = append(out, n)
			}
		}
	}
	return out
}
