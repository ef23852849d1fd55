package winimage

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/format/isoimage"
	"github.com/hwk-dev/hwk/internal/testing/pssim"
	"github.com/hwk-dev/hwk/node-images/windows"
)

// inputs makes small stand-ins for every host file the disk carries.
func inputs(t *testing.T) BuildInputs {
	t.Helper()
	dir := t.TempDir()
	file := func(rel string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("content of "+rel), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Win32-OpenSSH's release zip holds these beside install-sshd.ps1
	// (openssh-portable contrib/win32/openssh/OpenSSHBuildHelper.psm1's
	// payload list), which reads and rewrites openssh-events.man; sshd
	// makes its sshd_config from sshd_config_default.
	for _, f := range []string{"install-sshd.ps1", "sshd.exe", "ssh-agent.exe", "sftp-server.exe", "openssh-events.man"} {
		file("openssh/" + f)
	}
	if err := os.WriteFile(filepath.Join(dir, "openssh", "sshd_config_default"), []byte(pssim.SSHDConfigDefault), 0o644); err != nil {
		t.Fatal(err)
	}
	return BuildInputs{
		Unattend:          testOptions,
		KubernetesVersion: "v1.35.4", ContainerdVersion: "v2.3.1", PauseImage: "registry.k8s.io/pause:3.10.1",
		Containerd: []string{file("c/containerd.exe"), file("c/ctr.exe"), file("c/containerd-shim-runhcs-v1.exe")},
		Crictl:     file("crictl.exe"),
		Kubernetes: []string{file("k/kubelet.exe"), file("k/kubeadm.exe")},
		HwkKubelet: file("hwk-kubelet.exe"), HwkSeed: file("hwk-seed.exe"),
		OpenSSHDir: filepath.Join(dir, "openssh"),
		Images:     []string{file("pause.tar"), file("calico-node-windows.tar")},
	}
}

// TestBuildDiskLayout checks that the build disk, written and read back,
// has every file where provision.ps1 looks for it, and build.json with the
// fields it reads.
func TestBuildDiskLayout(t *testing.T) {
	image := filepath.Join(t.TempDir(), "build.iso")
	if err := BuildDisk(image, inputs(t)); err != nil {
		t.Fatal(err)
	}
	label, files, err := isoimage.Read(image)
	if err != nil {
		t.Fatal(err)
	}
	if label != SeedLabel {
		t.Errorf("label %q", label)
	}
	read := func(name string) string {
		b, ok := files[name]
		if !ok {
			t.Fatalf("the disk lacks %s", name)
		}
		return string(b)
	}
	for _, name := range []string{
		"bin/containerd/containerd.exe", "bin/containerd/ctr.exe", "bin/containerd/containerd-shim-runhcs-v1.exe",
		"bin/crictl.exe", "bin/k/kubelet.exe", "bin/k/kubeadm.exe", "bin/k/hwk-kubelet.exe", "bin/hwk-seed.exe",
		"openssh/OpenSSH-Win64/install-sshd.ps1", "openssh/OpenSSH-Win64/sshd.exe",
		"images/pause.tar", "images/calico-node-windows.tar",
	} {
		if got := read(name); !strings.HasPrefix(got, "content of ") {
			t.Errorf("%s holds %q", name, got)
		}
	}
	if !strings.Contains(read("Autounattend.xml"), "<Value>"+testOptions.Edition+"</Value>") {
		t.Error("answer files")
	}
	script, _ := windows.Recipe.ReadFile(ProvisionScript)
	if read(ProvisionScript) != string(script) {
		t.Error("provision.ps1 on the disk differs from the recipe")
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(read("build.json")), &cfg); err != nil {
		t.Fatal(err)
	}
	// provision.ps1 reads these fields and these directories.
	for field, want := range map[string]string{"windowsVersion": "2022", "kubernetesVersion": "v1.35.4", "containerdVersion": "v2.3.1", "pauseImage": "registry.k8s.io/pause:3.10.1"} {
		if cfg[field] != want || !strings.Contains(string(script), "$cfg."+field) {
			t.Errorf("build.json %s = %q (provision.ps1 reads $cfg.%s: %v)", field, cfg[field], field, strings.Contains(string(script), "$cfg."+field))
		}
	}
	for _, dir := range []string{`$work\bin\containerd\*.exe`, `$work\bin\crictl.exe`, `$work\bin\k\*.exe`, `$work\bin\hwk-seed.exe`, `$work\openssh\OpenSSH-Win64`, `"$work\images"`, `$work\build.json`} {
		if !strings.Contains(string(script), dir) {
			t.Errorf("provision.ps1 does not read %s", dir)
		}
	}
}

func TestBuildDiskRefusesMissingParts(t *testing.T) {
	in := inputs(t)
	in.Containerd = in.Containerd[:2]
	in.OpenSSHDir = ""
	in.PauseImage = ""
	err := BuildDisk(filepath.Join(t.TempDir(), "x.iso"), in)
	for _, want := range []string{"no containerd-shim-runhcs-v1.exe", "Windows Server 2022 has no built-in sshd", "no pause image"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
	in = inputs(t)
	in.Unattend.Version, in.OpenSSHDir = "2025", ""
	in.Unattend.Edition = "Windows Server 2025 Datacenter"
	if err := BuildDisk(filepath.Join(t.TempDir(), "y.iso"), in); err != nil {
		t.Errorf("2025 without OpenSSH (built in there): %v", err)
	}
	in = inputs(t)
	in.OpenSSHDir = t.TempDir()
	if err := BuildDisk(filepath.Join(t.TempDir(), "z.iso"), in); err == nil || !strings.Contains(err.Error(), "not an unpacked Win32-OpenSSH release") {
		t.Errorf("empty OpenSSH dir: %v", err)
	}
}
