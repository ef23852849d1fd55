package cmd

import (
	"bytes"
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

// TestStageKernel: where --configure-in sends stage 2 with no Docker
// engine answering, and what it says when nothing can take it.
func TestStageKernel(t *testing.T) {
	noDocker := func() (client.APIClient, error) {
		return client.New(client.WithHost("unix:///nonexistent/docker.sock"))
	}
	// What auto says of WSL 2 when nothing can take stage 2. On Windows
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
		{"auto takes a driver that boots kernels", configureAuto, []nodeimage.Format{nodeimage.FormatQCOW2}, []drivers.Driver{booter{driverstest.Up("libvirt")}}, true, ""},
		{"auto with none names each", configureAuto, []nodeimage.Format{nodeimage.FormatTar}, []drivers.Driver{booter{driverstest.Down("libvirt")}, driverstest.Up("docker")},
			false, "no Linux kernel to configure the node's Debian root in; start one of these and build again:\n  Docker: "},
		{"named driver", "libvirt", []nodeimage.Format{nodeimage.FormatTar}, []drivers.Driver{booter{driverstest.Down("libvirt")}}, true, ""},
		{"named driver that boots no kernel", "docker", nil, []drivers.Driver{driverstest.Up("docker")}, false, "--configure-in docker: "},
		{"a driver that boots no kernel", "hyperv", []nodeimage.Format{nodeimage.FormatTar}, []drivers.Driver{driverstest.Up("hyperv"), booter{driverstest.Up("libvirt")}}, false, "--configure-in hyperv: that driver cannot boot a kernel; use auto, docker, wsl2 or one of: libvirt"},
		{"docker format without Docker", configureAuto, []nodeimage.Format{nodeimage.FormatDocker}, []drivers.Driver{booter{driverstest.Up("libvirt")}}, false, "the docker format goes into a Docker engine"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &globals{registry: func() *drivers.Registry { return drivers.NewRegistry(c.reg...) }}
			opts := nodeimage.Options{Docker: noDocker, Formats: c.formats, CacheDir: t.TempDir()}
			err := g.stageKernel(context.Background(), &opts, c.where)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				if c.where == configureAuto && len(c.reg) > 1 {
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

// With no Docker engine, the default --formats leaves the docker format
// out and says so; formats asked for by name are kept (stageKernel then
// refuses docker's).
func TestBuildDefaultFormatsWithoutDocker(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"node-image", "build", "linux"}, "tar, qcow2, vhdx, vdi"},
		{[]string{"node-image", "build", "linux", "--formats", "docker,tar"}, "docker, tar"},
	} {
		var got []nodeimage.Format
		var out, errOut bytes.Buffer
		root := newRootCommand(Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, func() *drivers.Registry { return drivers.NewRegistry() }, func(g *globals) {
			g.configureIn = func(context.Context, *nodeimage.Options, string) error { return nil }
			g.build = func(_ context.Context, o nodeimage.Options) (*nodeimage.Manifest, error) {
				got = o.Formats
				return &nodeimage.Manifest{Name: "linux-test"}, nil
			}
		})
		root.SetArgs(c.args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, errOut.String())
		}
		if nodeimage.JoinFormats(got) != c.want {
			t.Errorf("%v built %s, want %s", c.args, nodeimage.JoinFormats(got), c.want)
		}
		if said := strings.Contains(errOut.String(), "No Docker engine answers"); said != (c.want != "docker, tar") {
			t.Errorf("%v: stderr %q", c.args, errOut.String())
		}
	}
}
