package build

import (
	"archive/zip"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/format/imagearchive"
	"github.com/hwk-dev/hwk/internal/format/isoimage"
	"github.com/hwk-dev/hwk/internal/nodeimage/winimage"
	"github.com/hwk-dev/hwk/internal/testing/imagearchivetest"
	"github.com/hwk-dev/hwk/internal/testing/pssim"
	"github.com/hwk-dev/hwk/internal/testing/winimagetest"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// redirect sends every request to one of two local servers, whatever
// host it names: registries to the in-process registry, everything else
// (dl.k8s.io, github.com) to the release server.
type redirect struct {
	registry, release string
}

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme = "http"
	switch req.URL.Host {
	case "registry.k8s.io", "quay.io", "index.docker.io", "registry-1.docker.io":
		req.URL.Host = r.registry
	default:
		req.URL.Host = r.release
	}
	req.Host = req.URL.Host
	return http.DefaultTransport.RoundTrip(req)
}

// windowsImageFor returns a random image whose config names platform p.
func windowsImageFor(t *testing.T, p v1.Platform) v1.Image {
	t.Helper()
	img, err := random.Image(300, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.OSVersion = p.OS, p.Architecture, p.OSVersion
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// windowsFixture is everything a Windows build reads: an ISO, the
// release downloads, a registry with the images, OpenSSH and hwk's
// programs.
type windowsFixture struct {
	opts     nodeimage.WindowsOptions
	registry string
	// pause2022 is the digest of the pause manifest a 2022 node runs.
	pause2022 v1.Hash
}

func newWindowsFixture(t *testing.T) *windowsFixture {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		if os.Getenv("HWK_REQUIRE_QEMU") == "1" {
			t.Fatal("HWK_REQUIRE_QEMU=1 but there is no qemu-img (Debian: qemu-utils)")
		}
		t.Skip("no qemu-img (Debian: qemu-utils)")
	}
	fx := &windowsFixture{}
	iso := winimagetest.ISO(t, map[string][]byte{
		"sources/install.wim": winimagetest.WIM(winimagetest.Server2022List),
		"setup.exe":           []byte("MZ"),
	})

	rel := newReleaseServer(t)
	for _, n := range []string{"kubelet.exe", "kubeadm.exe", "kube-proxy.exe"} {
		p := "/release/v1.35.4/bin/windows/amd64/" + n
		rel.files[p] = []byte("MZ " + n)
		rel.files[p+".sha256"] = []byte(sha256Hex(rel.files[p]))
	}
	ctd := tgz(t, map[string]string{"bin/containerd.exe": "MZ containerd", "bin/ctr.exe": "MZ ctr", "bin/containerd-shim-runhcs-v1.exe": "MZ shim"})
	rel.files["/containerd/containerd/releases/download/v2.3.1/containerd-2.3.1-windows-amd64.tar.gz"] = ctd
	rel.files["/containerd/containerd/releases/download/v2.3.1/containerd-2.3.1-windows-amd64.tar.gz.sha256sum"] =
		[]byte(sha256Hex(ctd) + "  containerd-2.3.1-windows-amd64.tar.gz\n")
	cri := tgz(t, map[string]string{"crictl.exe": "MZ crictl"})
	rel.files["/kubernetes-sigs/cri-tools/releases/download/v1.36.0/crictl-v1.36.0-windows-amd64.tar.gz"] = cri
	rel.files["/kubernetes-sigs/cri-tools/releases/download/v1.36.0/crictl-v1.36.0-windows-amd64.tar.gz.sha256"] = []byte(sha256Hex(cri))

	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	fx.registry = strings.TrimPrefix(reg.URL, "http://")
	// pause: an index of Linux, 2022 and 2025, as registry.k8s.io's.
	idx := v1.ImageIndex(empty.Index)
	for _, p := range []v1.Platform{
		{OS: "linux", Architecture: "amd64"},
		{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.4052"},
		{OS: "windows", Architecture: "amd64", OSVersion: "10.0.26100.6584"},
	} {
		img := windowsImageFor(t, p)
		if p.OSVersion == "10.0.20348.4052" {
			fx.pause2022, _ = img.Digest()
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	push := func(repo string, write func(name.Tag) error) {
		tag, err := name.NewTag(fx.registry + "/" + repo)
		if err != nil {
			t.Fatal(err)
		}
		if err := write(tag); err != nil {
			t.Fatal(err)
		}
	}
	push("pause:3.10.1", func(tag name.Tag) error { return remote.WriteIndex(tag, idx) })
	// HostProcess images: one manifest of an older build, which a 2022
	// host still runs as HostProcess.
	for _, repo := range []string{"calico/node-windows:v3.31.0", "calico/cni-windows:v3.31.0", "sigwindowstools/kube-proxy:v1.35.4-calico-hostprocess"} {
		img := windowsImageFor(t, v1.Platform{OS: "windows", Architecture: "amd64", OSVersion: "10.0.17763.7792"})
		push(repo, func(tag name.Tag) error { return remote.Write(tag, img) })
	}

	dir := t.TempDir()
	programs := filepath.Join(dir, "windows-amd64")
	os.MkdirAll(programs, 0o755)
	for _, exe := range []string{"hwk-seed.exe", "hwk-kubelet.exe"} {
		if err := os.WriteFile(filepath.Join(programs, exe), []byte("MZ "+exe), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	openssh := filepath.Join(dir, "OpenSSH-Win64.zip")
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	// Part of the release zip's layout (openssh-portable
	// OpenSSHBuildHelper.psm1's payload): install-sshd.ps1 rewrites
	// openssh-events.man; sshd copies sshd_config_default.
	for _, n := range []string{"install-sshd.ps1", "sshd.exe", "ssh-keygen.exe", "ssh-agent.exe", "sftp-server.exe", "openssh-events.man"} {
		w, _ := zw.Create("OpenSSH-Win64/" + n)
		w.Write([]byte("content of OpenSSH-Win64/" + n))
	}
	w, _ := zw.Create("OpenSSH-Win64/sshd_config_default")
	w.Write([]byte("#PubkeyAuthentication yes\n#PasswordAuthentication yes\nSubsystem\tsftp\tsftp-server.exe\n"))
	zw.Close()
	if err := os.WriteFile(openssh, zb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	fx.opts = nodeimage.WindowsOptions{
		ISO: iso, Version: "2022", KubernetesVersion: "v1.35.4", Source: nodeimage.Release,
		Formats: []nodeimage.Format{nodeimage.FormatQCOW2, nodeimage.FormatVHDX, nodeimage.FormatVDI}, DriverName: "fake",
		OpenSSH: openssh, Programs: programs, CacheDir: filepath.Join(dir, "cache"),
		DiskSize: 1 << 30,
		HTTP:     &http.Client{Transport: redirect{registry: fx.registry, release: strings.TrimPrefix(rel.URL, "http://")}},
	}
	return fx
}

// fakeInstaller stands in for a driver's install VM: it checks the media,
// writes what the guest would say on COM1, and leaves a disk in format
// (qcow2 when "") made by qemuImg (qemu-img on PATH when "").
type fakeInstaller struct {
	t       *testing.T
	console []string
	calls   int
	spec    drivers.InstallSpec
	disk    map[string][]byte // files read back from the build disk
	format  string
	qemuImg string
	// windows, when set, is the guest: a model of Windows Server
	// (internal/testing/pssim) that Setup installs from the build disk, running
	// provision.ps1 itself; its console is what the VM writes to COM1.
	windows *pssim.Machine
	// hang: the VM never powers off; Install returns when ctx ends.
	hang bool
	// appendLog: the console goes to the end of the log, as Hyper-V's
	// pipe follower and VirtualBox's file mode write it.
	appendLog bool
}

func (f *fakeInstaller) InstallFormat() string { return cmp.Or(f.format, "qcow2") }

func (f *fakeInstaller) Install(ctx context.Context, spec drivers.InstallSpec) error {
	f.calls++
	f.spec = spec
	if len(spec.Media) != 2 || !spec.PressKey {
		return fmt.Errorf("media %v, press key %v", spec.Media, spec.PressKey)
	}
	_, disk, err := isoimage.Read(spec.Media[1])
	if err != nil {
		return err
	}
	f.disk = disk
	console := f.console
	if f.windows != nil {
		if err := f.windows.Setup(winimage.SeedLabel, disk, winimage.Scripts()["firstLogonScript"]); err != nil {
			return fmt.Errorf("the model Windows: %w", err)
		}
		console = f.windows.Console
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if f.appendLog {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	logFile, err := os.OpenFile(spec.ConsoleLog, flags, 0o644)
	if err != nil {
		return err
	}
	_, err = logFile.WriteString(strings.Join(console, "\r\n") + "\r\n")
	if cerr := logFile.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if f.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	out, err := exec.CommandContext(ctx, cmp.Or(f.qemuImg, "qemu-img"), "create", "-f", f.InstallFormat(), spec.Disk, fmt.Sprint(spec.DiskBytes)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img create: %v\n%s", err, out)
	}
	return nil
}

var goodConsole = []string{
	"BdsDxe: loading Boot0001",
	"hwk-provision: phase 1: turning Windows Update off",
	"hwk-provision: phase 1: done, restarting",
	"hwk-provision: phase 2: containerd",
	"hwk-provision: done: sysprep generalized the disk; powering off",
}

// TestBuildWindowsPipeline checks the whole Windows build with everything
// except the VM real: the ISO is read through UDF, binaries are downloaded
// and checked, images pulled from a registry, the build disk written and
// the disk converted by qemu-img. The VM is a stand-in that reports what
// a guest would.
func TestBuildWindowsPipeline(t *testing.T) {
	fx := newWindowsFixture(t)
	inst := &fakeInstaller{t: t, console: goodConsole}
	opts := fx.opts
	opts.Installer = inst
	var steps, progress []string
	var mu sync.Mutex
	opts.Step = func(name string, fn func() error) error {
		mu.Lock()
		steps = append(steps, name)
		mu.Unlock()
		return fn()
	}
	opts.Progress = func(l string) { mu.Lock(); progress = append(progress, l); mu.Unlock() }

	m, err := BuildWindows(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if inst.calls != 1 || inst.spec.Media[0] != fx.opts.ISO || inst.spec.DiskBytes != 1<<30 {
		t.Errorf("install calls %d, spec %+v", inst.calls, inst.spec)
	}
	// The build disk holds what provision.ps1 reads.
	for _, name := range []string{"Autounattend.xml", "provision.ps1", "build.json",
		"bin/k/kubelet.exe", "bin/k/kubeadm.exe", "bin/k/kube-proxy.exe", "bin/k/hwk-kubelet.exe", "bin/hwk-seed.exe",
		"bin/containerd/containerd.exe", "bin/containerd/ctr.exe", "bin/containerd/containerd-shim-runhcs-v1.exe", "bin/crictl.exe",
		"openssh/OpenSSH-Win64/install-sshd.ps1", "openssh/OpenSSH-Win64/sshd.exe"} {
		if _, ok := inst.disk[name]; !ok {
			t.Errorf("the build disk lacks %s", name)
		}
	}
	if got := string(inst.disk["bin/k/kubelet.exe"]); got != "MZ kubelet.exe" {
		t.Errorf("kubelet.exe on the disk is %q", got)
	}
	if !bytes.Contains(inst.disk["Autounattend.xml"], []byte("<Value>Windows Server 2022 SERVERDATACENTERCORE</Value>")) {
		t.Error("Autounattend.xml does not install the Datacenter Server Core edition")
	}
	if !bytes.Contains(inst.disk["build.json"], []byte(`"pauseImage": "registry.k8s.io/pause:3.10.1"`)) {
		t.Errorf("build.json: %s", inst.disk["build.json"])
	}
	var images []string
	for name := range inst.disk {
		if strings.HasPrefix(name, "images/") {
			images = append(images, name)
		}
	}
	if len(images) != 4 {
		t.Errorf("images on the disk: %v", images)
	}

	// The manifest: what went in, the password kept private.
	if m.OS != "windows" || m.Windows == nil || m.Windows.Version != "2022" || m.Windows.Build != 20348 ||
		m.Windows.Edition != "Windows Server 2022 SERVERDATACENTERCORE" || len(m.Windows.ISOSHA256) != 64 {
		t.Errorf("manifest %+v windows %+v", m, m.Windows)
	}
	if !bytes.Contains(inst.disk["Autounattend.xml"], []byte(m.Windows.AdminPassword)) || m.Windows.AdminPassword == "" {
		t.Error("the manifest's password is not the one the answer file sets")
	}
	st, err := os.Stat(filepath.Join(m.Dir, "manifest.json"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("manifest mode %v, %v", st.Mode(), err)
	}
	for _, c := range []string{"kubernetes", "containerd", "hcsshim", "crictl", "windows"} {
		if m.Components[c] == "" {
			t.Errorf("manifest lacks component %s: %v", c, m.Components)
		}
	}
	var pause nodeimage.Image
	for _, im := range m.Images {
		if im.Ref == "registry.k8s.io/pause:3.10.1" {
			pause = im
		}
	}
	if pause.Digest != fx.pause2022.String() {
		t.Errorf("pause %+v; want the 2022 manifest %s", pause, fx.pause2022)
	}
	for _, f := range []nodeimage.Format{nodeimage.FormatQCOW2, nodeimage.FormatVHDX, nodeimage.FormatVDI} {
		a, ok := m.Artifacts[f]
		if !ok {
			t.Errorf("no %s artifact", f)
			continue
		}
		out, err := exec.Command("qemu-img", "info", filepath.Join(m.Dir, a.Path)).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "file format: "+string(f)) {
			t.Errorf("%s: %v\n%s", a.Path, err, out)
		}
	}
	if !slices.Equal(progress, []string{"phase 1: turning Windows Update off", "phase 1: done, restarting", "phase 2: containerd", "done: sysprep generalized the disk; powering off"}) {
		t.Errorf("progress %q", progress)
	}
	list, err := nodeimage.List(opts.CacheDir)
	if err != nil || len(list) != 1 || list[0].Name != m.Name {
		t.Errorf("List: %v, %v", list, err)
	}

	// Again with nothing changed: a lookup, no VM.
	steps = nil
	m2, err := BuildWindows(context.Background(), opts)
	if err != nil || m2.Name != m.Name || inst.calls != 1 {
		t.Errorf("second build: %v, %d installs", err, inst.calls)
	}
	if len(steps) == 0 || !strings.HasPrefix(steps[len(steps)-1], "Cached node image") {
		t.Errorf("second build steps %q", steps)
	}
}

// TestBuildWindowsOwnFormat checks that where there is no qemu-img to
// convert the installed disk (a Windows laptop building with VirtualBox),
// the image is made in the install driver's own format only, the installed
// disk kept as it is.
func TestBuildWindowsOwnFormat(t *testing.T) {
	qemuImg, err := exec.LookPath("qemu-img")
	if err != nil {
		if os.Getenv("HWK_REQUIRE_QEMU") == "1" {
			t.Fatal("HWK_REQUIRE_QEMU=1 but there is no qemu-img (Debian: qemu-utils)")
		}
		t.Skip("the stand-in install VM makes its disk with qemu-img")
	}
	fx := newWindowsFixture(t)
	inst := &fakeInstaller{t: t, console: goodConsole, format: "vdi", qemuImg: qemuImg}
	opts := fx.opts
	opts.Installer = inst
	t.Setenv("PATH", t.TempDir())
	opts.Formats = nodeimage.DefaultWindowsFormats(nodeimage.FormatVDI)
	var steps []string
	opts.Step = func(name string, fn func() error) error { steps = append(steps, name); return fn() }
	m, err := BuildWindows(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Artifacts) != 1 || m.Artifacts[nodeimage.FormatVDI].Path == "" || !slices.Contains(steps, "Keep the disk as vdi") {
		t.Fatalf("artifacts %v, steps %q", m.Artifacts, steps)
	}
	out, err := exec.Command(qemuImg, "info", filepath.Join(m.Dir, m.Artifacts[nodeimage.FormatVDI].Path)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "file format: vdi") {
		t.Errorf("%v\n%s", err, out)
	}
}

// TestBuildWindowsFailures checks that a guest that fails provisioning, or
// powers off before it ends, fails the build with its reason, and leaves
// no image behind.
func TestBuildWindowsFailures(t *testing.T) {
	fx := newWindowsFixture(t)
	for name, c := range map[string]struct {
		console []string
		want    string
	}{
		"provisioning failed": {append(goodConsole[:3:3], "hwk-provision: FAILED: containerd.exe --register-service exited 1 (at provision.ps1:140)",
			`hwk-provision: the full log is C:\hwk-provision.log in the guest; powering off`), "provisioning in the guest FAILED: containerd.exe --register-service exited 1"},
		"cut short":         {goodConsole[:3], `its last step was "phase 1: done, restarting"`},
		"never provisioned": {[]string{"BdsDxe: failed to load Boot0001"}, "Windows Setup never ran provision.ps1"},
	} {
		t.Run(name, func(t *testing.T) {
			opts := fx.opts
			opts.CacheDir = t.TempDir()
			opts.Installer = &fakeInstaller{t: t, console: c.console}
			_, err := BuildWindows(context.Background(), opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if list, _ := nodeimage.List(opts.CacheDir); len(list) != 0 {
				t.Errorf("a failed build left image %s", list[0].Name)
			}
		})
	}
}

func TestBuildWindowsRefusesBadOptions(t *testing.T) {
	fx := newWindowsFixture(t)
	inst := &fakeInstaller{t: t, console: goodConsole}
	for name, c := range map[string]struct {
		change func(o *nodeimage.WindowsOptions)
		want   string
	}{
		"no openssh for 2022":  {func(o *nodeimage.WindowsOptions) { o.OpenSSH = "" }, "--openssh is required for Windows Server 2022"},
		"bad version":          {func(o *nodeimage.WindowsOptions) { o.Version = "2019" }, `--version "2019": use 2022 or 2025`},
		"docker format":        {func(o *nodeimage.WindowsOptions) { o.Formats = []nodeimage.Format{nodeimage.FormatDocker} }, `"docker" is not one of qcow2, vhdx, vdi`},
		"no programs":          {func(o *nodeimage.WindowsOptions) { o.Programs = t.TempDir() }, "hwk's Windows program hwk-seed.exe is not in"},
		"2025 from a 2022 ISO": {func(o *nodeimage.WindowsOptions) { o.Version = "2025" }, "no Windows Server 2025 (build 26100) Datacenter Server Core edition"},
		"unknown edition":      {func(o *nodeimage.WindowsOptions) { o.Edition = "Windows Server 2022 Essentials" }, `no edition "Windows Server 2022 Essentials"`},
	} {
		t.Run(name, func(t *testing.T) {
			opts := fx.opts
			opts.CacheDir = t.TempDir()
			opts.Installer = inst
			c.change(&opts)
			if _, err := BuildWindows(context.Background(), opts); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
			if entries, _ := os.ReadDir(filepath.Join(opts.CacheDir, "node-images")); len(entries) != 0 {
				t.Errorf("bad options left %v in the cache", entries)
			}
		})
	}
	if inst.calls != 0 {
		t.Errorf("bad options started %d installs", inst.calls)
	}
}

// TestBuildWindowsFromArchives checks that with --image-archive the images
// come from the archives (no registry is asked), one platform each: the
// node's build, or any for HostProcess images; and that an archive whose
// image no 2022 node runs is refused, naming what it holds.
func TestBuildWindowsFromArchives(t *testing.T) {
	fx := newWindowsFixture(t)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("windows-images.tar", imagearchivetest.OCI(
		imagearchivetest.Image{Refs: []string{"registry.k8s.io/pause:3.10.1"}, Platforms: []string{"linux/amd64", "windows/amd64:10.0.20348.4052", "windows/amd64:10.0.26100.6584"}},
		imagearchivetest.Image{Refs: []string{"quay.io/calico/node-windows:v3.31.0"}, Platforms: []string{"windows/amd64:10.0.17763.7792"}},
		imagearchivetest.Image{Refs: []string{"quay.io/calico/cni-windows:v3.31.0"}, Platforms: []string{"windows/amd64:10.0.17763.7792"}},
	))
	kubeProxy := write("kube-proxy.tar", imagearchivetest.Docker(
		imagearchivetest.Image{Refs: []string{"sigwindowstools/kube-proxy:v1.35.4-calico-hostprocess"}, Platforms: []string{"windows/amd64:10.0.17763.7792"}},
	))
	opts := fx.opts
	opts.CacheDir = t.TempDir()
	opts.ImageArchives = []string{good, kubeProxy}
	// No registry: a pull would fail.
	opts.HTTP = &http.Client{Transport: redirect{registry: "127.0.0.1:1", release: opts.HTTP.Transport.(redirect).release}}
	inst := &fakeInstaller{t: t, console: goodConsole}
	opts.Installer = inst
	m, err := BuildWindows(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Images) != 4 {
		t.Fatalf("images %+v", m.Images)
	}
	for name, data := range inst.disk {
		if !strings.HasPrefix(name, "images/") {
			continue
		}
		a, err := imagearchive.Scan(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(a.Images) != 1 || len(a.Images[0].Manifests) != 1 {
			t.Fatalf("%s holds %d images", name, len(a.Images))
		}
		p := a.Images[0].Manifests[0].Platform
		if strings.Contains(name, "pause") && p.OSVersion != "10.0.20348.4052" {
			t.Errorf("pause for a 2022 node is %s", p)
		}
	}

	bad := write("pause-2025.tar", imagearchivetest.OCI(
		imagearchivetest.Image{Refs: []string{"registry.k8s.io/pause:3.10.1"}, Platforms: []string{"windows/amd64:10.0.26100.6584"}},
	))
	opts.CacheDir = t.TempDir()
	opts.ImageArchives = []string{bad}
	_, err = BuildWindows(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "has nothing a windows/amd64 ltsc2022") || !strings.Contains(err.Error(), "built for a newer Windows") {
		t.Errorf("a 2025-only pause for a 2022 image: %v", err)
	}
}

// TestBuildWindowsOnWindowsModel checks the build with its guest side run
// (provision.ps1, phase by phase to sysprep, in a model of Windows Server
// 2022, internal/testing/pssim, whose CD files are read-only): it succeeds,
// and the disk it captured holds the manifest's Administrator password
// nowhere in plain text.
func TestBuildWindowsOnWindowsModel(t *testing.T) {
	fx := newWindowsFixture(t)
	inst := &fakeInstaller{t: t, windows: pssim.NewServer2022()}
	opts := fx.opts
	opts.Installer = inst
	var progress []string
	opts.Progress = func(l string) { progress = append(progress, l) }
	m, err := BuildWindows(context.Background(), opts)
	if err != nil {
		t.Fatalf("%v\nconsole:\n%s", err, strings.Join(inst.windows.Console, "\n"))
	}
	if len(progress) < 10 || !strings.HasPrefix(progress[len(progress)-1], "done:") || !inst.windows.Generalized {
		t.Errorf("progress %q", progress)
	}
	if where := inst.windows.Secrets(m.Windows.AdminPassword); len(where) > 0 {
		t.Errorf("the captured disk holds the Administrator password in plain text in %v", where)
	}
}

// TestBuildWindowsStalls checks that an install phase that outlives its
// budget stops the build with the phase, the last progress line and where
// to look, instead of waiting forever.
func TestBuildWindowsStalls(t *testing.T) {
	fx := newWindowsFixture(t)
	opts := fx.opts
	opts.Installer = &fakeInstaller{t: t, console: goodConsole[:4], hang: true}
	opts.Budgets = nodeimage.InstallBudgets{Setup: time.Hour, Phase1: time.Hour, Phase2: 300 * time.Millisecond, Sysprep: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := BuildWindows(ctx, opts)
	if err == nil || !strings.Contains(err.Error(), "phase 2 took longer than 300ms") || !strings.Contains(err.Error(), `"phase 2: containerd"`) ||
		!strings.Contains(err.Error(), "install-console.log") || !strings.Contains(err.Error(), "C:\\hwk-provision.log") {
		t.Fatalf("err = %v", err)
	}
	if ctx.Err() != nil {
		t.Error("the build waited for the test's own deadline")
	}
}

// TestBuildWindowsLanguage checks that the answer file takes the edition's
// language from the ISO's image list, not en-US (Setup asks when the
// answer file names a language the media lacks), and that the manifest
// keeps it for the clones' answer files.
func TestBuildWindowsLanguage(t *testing.T) {
	fx := newWindowsFixture(t)
	opts := fx.opts
	opts.ISO = winimagetest.ISO(t, map[string][]byte{"sources/install.wim": winimagetest.WIM(winimagetest.Server2022ListIn("de-DE")), "setup.exe": []byte("MZ")})
	inst := &fakeInstaller{t: t, console: goodConsole}
	opts.Installer = inst
	m, err := BuildWindows(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if f := "Autounattend.xml"; !bytes.Contains(inst.disk[f], []byte("<UILanguage>de-DE</UILanguage>")) || bytes.Contains(inst.disk[f], []byte("en-US")) {
		t.Errorf("%s:\n%s", f, inst.disk[f])
	}
	if _, ok := inst.disk["sysprep-unattend.xml"]; ok {
		t.Error("the build disk carries an answer file for the clones: the image would keep it")
	}
	if m.Windows == nil || m.Windows.Locale != "de-DE" {
		t.Errorf("manifest: %+v", m.Windows)
	}
}

// TestBuildWindowsRetryAfterFailure checks that a build that failed and is
// run again (same inputs, same directory) is judged by its own console,
// not the failed attempt's, whose log is kept as install-console.log.prev.
func TestBuildWindowsRetryAfterFailure(t *testing.T) {
	fx := newWindowsFixture(t)
	opts := fx.opts
	failed := append(goodConsole[:3:3], "hwk-provision: FAILED: install-sshd.ps1 exited with status 1 (at provision.ps1:244)",
		`hwk-provision: the full log is C:\hwk-provision.log in the guest; powering off`)
	opts.Installer = &fakeInstaller{t: t, console: failed, appendLog: true}
	if _, err := BuildWindows(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "FAILED: install-sshd.ps1") {
		t.Fatalf("the first attempt: %v", err)
	}
	var progress []string
	opts.Progress = func(l string) { progress = append(progress, l) }
	opts.Installer = &fakeInstaller{t: t, console: goodConsole, appendLog: true}
	m, err := BuildWindows(context.Background(), opts)
	if err != nil {
		t.Fatalf("the second attempt: %v", err)
	}
	if len(progress) != 4 || progress[0] != "phase 1: turning Windows Update off" {
		t.Errorf("the second attempt's progress %q", progress)
	}
	prev, err := os.ReadFile(filepath.Join(m.Dir, "install-console.log.prev"))
	if err != nil || !strings.Contains(string(prev), "FAILED: install-sshd.ps1") {
		t.Errorf("the first attempt's log: %q, %v", prev, err)
	}
}
