package build_test

import (
	"archive/zip"
	"bytes"
	"context"
	"debug/pe"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/drivers/libvirt"
	"github.com/hwk-dev/hwk/internal/nodeimage/build"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/testing/imagearchivetest"
	"github.com/hwk-dev/hwk/internal/testing/winimagetest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// TestWindowsImageBuild checks `node-image build windows`'s whole build
// with every part real except Windows itself, for which a UEFI shell
// script in a real libvirt VM stands in; with HWK_NODE_IMAGE_TEST=1 (make
// node-image-test).
func TestWindowsImageBuild(t *testing.T) {
	// Real: the Windows binaries are built from source through the Go
	// module proxy (GOOS=windows, checked to be amd64 PE executables), the
	// ISO is read through UDF, the build disk is written, the VM boots
	// from the ISO under this host's acceleration and powers off the way a
	// finished install does, and qemu-img makes every format. The Windows
	// container images, which no registry here serves, come from archives.
	if os.Getenv("HWK_NODE_IMAGE_TEST") != "1" {
		t.Skip("builds the Windows binaries from source and boots a VM; set HWK_NODE_IMAGE_TEST=1 (make node-image-test)")
	}
	lv := libvirt.New(libvirt.Options{Dirs: state.DefaultDirs()})
	if _, err := lv.Preflight(context.Background()); err != nil {
		if os.Getenv("HWK_REQUIRE_LIBVIRT") == "1" {
			t.Fatal(err)
		}
		t.Skipf("no libvirt: %v", err)
	}
	dir := t.TempDir()
	iso := winimagetest.ShellISO(t, map[string][]byte{
		"sources/install.wim": winimagetest.WIM(winimagetest.Server2022List),
	}, "echo \"hwk-provision: phase 1: (a UEFI shell stands in for Windows Setup)\"\r\n"+
		"echo \"hwk-provision: done: sysprep generalized the disk; powering off\"\r\nreset -s\r\n")

	programs := filepath.Join(dir, "windows-amd64")
	gobuild := exec.Command("go", "build", "-o", programs+string(filepath.Separator), "github.com/hwk-dev/hwk/cmd/hwk-seed", "github.com/hwk-dev/hwk/cmd/hwk-kubelet")
	gobuild.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := gobuild.CombinedOutput(); err != nil {
		t.Fatalf("build hwk's Windows programs: %v\n%s", err, out)
	}
	openssh := filepath.Join(dir, "OpenSSH-Win64.zip")
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for _, n := range []string{"OpenSSH-Win64/install-sshd.ps1", "OpenSSH-Win64/sshd.exe"} {
		w, _ := zw.Create(n)
		w.Write([]byte("stand-in " + n))
	}
	zw.Close()
	os.WriteFile(openssh, zb.Bytes(), 0o644)
	archive := filepath.Join(dir, "windows-images.tar")
	os.WriteFile(archive, imagearchivetest.OCI(
		imagearchivetest.Image{Refs: []string{"registry.k8s.io/pause:3.10.1"}, Platforms: []string{"windows/amd64:10.0.20348.4052", "windows/amd64:10.0.26100.6584"}},
		imagearchivetest.Image{Refs: []string{"quay.io/calico/node-windows:v3.31.0"}, Platforms: []string{"windows/amd64:10.0.17763.7792"}},
		imagearchivetest.Image{Refs: []string{"quay.io/calico/cni-windows:v3.31.0"}, Platforms: []string{"windows/amd64:10.0.17763.7792"}},
		imagearchivetest.Image{Refs: []string{"docker.io/sigwindowstools/kube-proxy:" + config.DefaultKubernetesVersion + "-calico-hostprocess"}, Platforms: []string{"windows/amd64:10.0.17763.7792"}},
	), 0o644)

	cache := state.DefaultDirs().Cache
	var progress []string
	var bins []string
	opts := nodeimage.WindowsOptions{
		ISO: iso, Version: "2022", KubernetesVersion: config.DefaultKubernetesVersion, Source: nodeimage.FromSource,
		Formats:   nodeimage.WindowsFormats,
		Installer: lv, DriverName: "libvirt",
		OpenSSH: openssh, ImageArchives: []string{archive}, Programs: programs,
		// A fresh cache for the image (the stand-in must not be taken for
		// a real Windows image by a later `hwk up`); binaries are built in
		// the shared one below, so later runs reuse them.
		CacheDir: filepath.Join(dir, "cache"),
		DiskSize: 2 << 30, CPUs: 1, MemoryBytes: 1 << 30,
		Step: func(name string, fn func() error) error {
			start := time.Now()
			err := fn()
			t.Logf("%s: %s", name, time.Since(start).Round(100*time.Millisecond))
			return err
		},
		Log:      testWriter{t},
		Progress: func(l string) { progress = append(progress, l) },
	}
	// Share the Go-built binaries with the machine's cache: link its
	// build directory into the test's.
	if err := os.MkdirAll(filepath.Join(cache, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(opts.CacheDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(cache, "build"), filepath.Join(opts.CacheDir, "build")); err != nil {
		t.Fatal(err)
	}
	m, err := build.BuildWindows(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range m.Stages {
		t.Logf("stage %s: %.1fs", st.Name, st.Seconds)
	}
	if len(progress) != 2 || !strings.HasPrefix(progress[1], "done:") {
		t.Errorf("progress from the VM's console: %q", progress)
	}
	for f, a := range m.Artifacts {
		out, err := exec.Command("qemu-img", "info", filepath.Join(m.Dir, a.Path)).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "file format: "+string(f)) || !strings.Contains(string(out), "virtual size: 2 GiB") {
			t.Errorf("%s: %v\n%s", f, err, out)
		}
	}
	// Every binary the recipe names was built for windows/amd64.
	for name := range m.Binaries {
		comp, exe, _ := strings.Cut(name, "/")
		matches, _ := filepath.Glob(filepath.Join(cache, "build", comp+"-*", exe))
		if len(matches) == 0 {
			t.Errorf("%s: not in the build cache", name)
			continue
		}
		for _, p := range matches {
			f, err := pe.Open(p)
			if err != nil {
				t.Errorf("%s is not a PE executable: %v", p, err)
				continue
			}
			if f.Machine != pe.IMAGE_FILE_MACHINE_AMD64 {
				t.Errorf("%s: machine %#x", p, f.Machine)
			}
			f.Close()
		}
		bins = append(bins, name)
	}
	if len(bins) != 7 {
		t.Errorf("binaries %v; want kubelet, kubeadm, kube-proxy, containerd, ctr, the shim and crictl", bins)
	}
	t.Logf("binaries: %v", bins)
}
