package stage2

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/testing/driverstest"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// booter is a driver that boots kernels (as libvirt does).
type booter struct{ driverstest.Fake }

func (booter) BootKernel(context.Context, drivers.KernelBootSpec, func(drivers.OutputDisk) error) error {
	return nil
}
func (booter) RemoveBoot(context.Context, string) error { return nil }

// TestChoose checks where --configure-in sends stage 2 with no Docker
// engine answering, and the error when nothing can take it.
func TestChoose(t *testing.T) {
	noDocker := func() (client.APIClient, error) {
		return client.New(client.WithHost("unix:///nonexistent/docker.sock"))
	}
	// What auto reports of WSL 2 when nothing can take stage 2. On Windows
	// the real check runs, on a host made one without WSL: no wsl.exe in
	// System32 or on PATH.
	noWSL := "\n  WSL 2: only on Windows"
	if runtime.GOOS == "windows" {
		t.Setenv("SystemRoot", t.TempDir())
		t.Setenv("PATH", t.TempDir())
		noWSL = "\n  WSL 2: wsl.exe not found"
		if !nativeAMD64() {
			noWSL = "\n  WSL 2: only on an amd64 Windows"
		}
	}
	for _, c := range []struct {
		name, where string
		formats     []nodeimage.Format
		reg         []drivers.Driver
		vm          bool   // a VM of the booter takes stage 2
		err         string // else this error
	}{
		{"auto takes a driver that boots kernels", Auto, []nodeimage.Format{nodeimage.FormatQCOW2}, []drivers.Driver{booter{driverstest.Up("libvirt")}}, true, ""},
		{"auto with none names each", Auto, []nodeimage.Format{nodeimage.FormatTar}, []drivers.Driver{booter{driverstest.Down("libvirt")}, driverstest.Up("docker")},
			false, "no Linux kernel to configure the node's Debian root in; start one of these and build again:\n  Docker: "},
		{"named driver", "libvirt", []nodeimage.Format{nodeimage.FormatTar}, []drivers.Driver{booter{driverstest.Down("libvirt")}}, true, ""},
		{"named driver that boots no kernel", "docker", nil, []drivers.Driver{driverstest.Up("docker")}, false, "--configure-in docker: "},
		{"a driver that boots no kernel", "hyperv", []nodeimage.Format{nodeimage.FormatTar}, []drivers.Driver{driverstest.Up("hyperv"), booter{driverstest.Up("libvirt")}}, false, "--configure-in hyperv: that driver cannot boot a kernel; use auto, docker, wsl2 or one of: libvirt"},
		{"docker format without Docker", Auto, []nodeimage.Format{nodeimage.FormatDocker}, []drivers.Driver{booter{driverstest.Up("libvirt")}}, false, "the docker format goes into a Docker engine"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := drivers.NewRegistry(c.reg...)
			opts := nodeimage.Options{Docker: noDocker, Formats: c.formats, CacheDir: t.TempDir()}
			err := Choose(context.Background(), &opts, c.where, reg)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				if c.where == Auto && len(c.reg) > 1 {
					for _, want := range []string{noWSL, "\n  libvirt: libvirt is not installed"} {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("err = %v, want %q", err, want)
						}
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := opts.VM != nil; got != c.vm || opts.Kernel != nil {
				t.Errorf("VM %v, kernel %v", opts.VM, opts.Kernel)
			}
		})
	}
}
