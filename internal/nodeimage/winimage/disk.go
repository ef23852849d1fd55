package winimage

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/hwk-dev/hwk/internal/format/isoimage"
	"github.com/hwk-dev/hwk/node-images/windows"
)

// BuildInputs is everything the build disk carries: the guest downloads
// nothing, so every binary and image is fetched (and checked) or built on
// the host first.
type BuildInputs struct {
	Unattend UnattendOptions
	// Versions go to build.json, which provision.ps1 reads.
	KubernetesVersion string
	ContainerdVersion string
	// PauseImage is the sandbox image containerd pins (one of Images).
	PauseImage string
	// Host files, by their names on the disk: containerd's binaries
	// (containerd.exe, ctr.exe, containerd-shim-runhcs-v1.exe), crictl,
	// the Kubernetes binaries (kubelet.exe, kubeadm.exe), hwk's own two
	// Windows programs.
	Containerd []string
	Crictl     string
	Kubernetes []string
	HwkKubelet string
	HwkSeed    string
	// OpenSSHDir is an unpacked Win32-OpenSSH release (OpenSSH-Win64),
	// for Windows Server 2022, whose sshd is not built in; Windows Server
	// 2025 has it.
	OpenSSHDir string
	// Images are container image archives for the node's containerd.
	Images []string
	// Updates are Windows update packages (.msu, .cab) that provision.ps1
	// installs with DISM in phase 1, in this order.
	Updates []string
}

// buildUpdate is one update of build.json: its name as the user gave it
// and its file under updates\ on the disk.
type buildUpdate struct {
	Name string `json:"name"`
	File string `json:"file"`
}

// jolietMax is the longest file name Joliet records (64 UCS-2
// characters, as its specification and xorriso's -joliet limit it):
// the Microsoft Update Catalog's names (windows10.0-kbNNNNNNN-x64_ and a
// 40-digit hash) are longer.
const jolietMax = 64

// UpdateFile returns update i's file name on the build disk: its own name
// when Joliet holds it, else its start with the number i, so that no two
// are the same.
func UpdateFile(i int, name string) string {
	if len(name) <= jolietMax {
		return name
	}
	ext := path.Ext(name)
	tail := fmt.Sprintf("~%d%s", i+1, ext)
	return name[:jolietMax-len(tail)] + tail
}

// buildConfig is build.json.
type buildConfig struct {
	WindowsVersion    string `json:"windowsVersion"`
	KubernetesVersion string `json:"kubernetesVersion"`
	ContainerdVersion string `json:"containerdVersion"`
	PauseImage        string `json:"pauseImage"`
	// Updates, in the order they go in.
	Updates []buildUpdate `json:"updates"`
}

// BuildDisk writes the build disk: an ISO labelled HWKSEED with
// Autounattend.xml at its root (where Windows Setup looks), the
// provisioning script and what it installs, laid out as provision.ps1's
// header describes.
func BuildDisk(target string, in BuildInputs) error {
	files, err := diskFiles(in)
	if err != nil {
		return fmt.Errorf("build disk: %w", err)
	}
	return isoimage.Write(target, SeedLabel, files)
}

func diskFiles(in BuildInputs) ([]isoimage.File, error) {
	unattend, err := Unattend(in.Unattend)
	if err != nil {
		return nil, err
	}
	provision, err := windows.Recipe.ReadFile(ProvisionScript)
	if err != nil {
		return nil, err
	}
	var errs []string
	need := func(what, value string) {
		if value == "" {
			errs = append(errs, "no "+what)
		}
	}
	need("Kubernetes version", in.KubernetesVersion)
	need("containerd version", in.ContainerdVersion)
	need("pause image", in.PauseImage)
	need("crictl.exe", in.Crictl)
	need("hwk-kubelet.exe", in.HwkKubelet)
	need("hwk-seed.exe", in.HwkSeed)
	if in.Unattend.Version == "2022" && in.OpenSSHDir == "" {
		errs = append(errs, "no OpenSSH: Windows Server 2022 has no built-in sshd, so the disk must carry Win32-OpenSSH")
	}
	if len(in.Images) == 0 {
		errs = append(errs, "no container images (the pause image at least)")
	}
	has := func(list []string, names ...string) {
		for _, n := range names {
			found := false
			for _, p := range list {
				found = found || strings.EqualFold(filepath.Base(p), n)
			}
			if !found {
				errs = append(errs, "no "+n)
			}
		}
	}
	has(in.Containerd, "containerd.exe", "ctr.exe", "containerd-shim-runhcs-v1.exe")
	has(in.Kubernetes, "kubelet.exe", "kubeadm.exe")
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}

	updates := []buildUpdate{}
	seen := map[string]bool{}
	for i, p := range in.Updates {
		u := buildUpdate{Name: filepath.Base(p), File: UpdateFile(i, filepath.Base(p))}
		if seen[strings.ToLower(u.File)] {
			return nil, fmt.Errorf("update %s is there twice (Windows' file names ignore case)", u.Name)
		}
		seen[strings.ToLower(u.File)] = true
		updates = append(updates, u)
	}
	cfg, err := json.MarshalIndent(buildConfig{
		WindowsVersion: in.Unattend.Version, KubernetesVersion: in.KubernetesVersion,
		ContainerdVersion: in.ContainerdVersion, PauseImage: in.PauseImage, Updates: updates,
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	files := []isoimage.File{
		{Name: "Autounattend.xml", Data: unattend},
		{Name: ProvisionScript, Data: provision},
		{Name: "build.json", Data: append(cfg, '\n')},
		{Name: "bin/crictl.exe", Source: in.Crictl},
		{Name: "bin/hwk-seed.exe", Source: in.HwkSeed},
		{Name: "bin/k/hwk-kubelet.exe", Source: in.HwkKubelet},
	}
	for _, p := range in.Containerd {
		files = append(files, isoimage.File{Name: "bin/containerd/" + filepath.Base(p), Source: p})
	}
	for _, p := range in.Kubernetes {
		files = append(files, isoimage.File{Name: "bin/k/" + filepath.Base(p), Source: p})
	}
	for _, p := range in.Images {
		files = append(files, isoimage.File{Name: "images/" + filepath.Base(p), Source: p})
	}
	for i, p := range in.Updates {
		files = append(files, isoimage.File{Name: "updates/" + updates[i].File, Source: p})
	}
	if in.OpenSSHDir != "" {
		root := in.OpenSSHDir
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, isoimage.File{Name: path.Join("openssh/OpenSSH-Win64", filepath.ToSlash(rel)), Source: p})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("OpenSSH: %w", err)
		}
		if _, err := os.Stat(filepath.Join(root, "install-sshd.ps1")); err != nil {
			return nil, fmt.Errorf("OpenSSH: %s is not an unpacked Win32-OpenSSH release (no install-sshd.ps1)", root)
		}
	}
	return files, nil
}
