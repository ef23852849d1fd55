// Package pscatalog is the one list of every PowerShell script hwk can
// send to a Windows node or a Windows host: the scripts each package
// makes (its Scripts function) and the .ps1 files hwk ships (the Windows
// image's provisioning script, kube-proxy's start script). Its tests
// check them all, and that the list is complete (`make check-ps`).
package pscatalog

import (
	hwk "github.com/hwk-dev/hwk"
	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/internal/containerd"
	"github.com/hwk-dev/hwk/internal/doctor"
	"github.com/hwk-dev/hwk/internal/drivers/hyperv"
	"github.com/hwk-dev/hwk/internal/drivers/virtualbox"
	"github.com/hwk-dev/hwk/internal/drivers/wsl2"
	"github.com/hwk-dev/hwk/internal/logs"
	"github.com/hwk-dev/hwk/internal/nodeimage/winimage"
	"github.com/hwk-dev/hwk/internal/winseed"
	"github.com/hwk-dev/hwk/node-images/windows"
)

// Script is one script of the catalog.
type Script struct {
	// Source is the Go package that makes it, relative to the module
	// ("internal/drivers/hyperv"), or the shipped file it is.
	Source string
	// Key names the declarations of Source that make it, joined by +,
	// then after a / the variant ("createScript+Wrap/windows"); "" for a
	// shipped file.
	Key  string
	Text string
}

// Name is the script's name in messages.
func (s Script) Name() string {
	if s.Key == "" {
		return s.Source
	}
	return s.Source + "." + s.Key
}

// packages are the packages that make scripts, with their Scripts.
var packages = []struct {
	path    string
	scripts func() map[string]string
}{
	{"internal/drivers/hyperv", hyperv.Scripts},
	{"internal/drivers/virtualbox", virtualbox.Scripts},
	{"internal/drivers/wsl2", wsl2.Scripts},
	{"internal/bootstrap", bootstrap.Scripts},
	{"internal/containerd", containerd.Scripts},
	{"internal/doctor", doctor.Scripts},
	{"internal/logs", logs.Scripts},
	{"internal/nodeimage/winimage", winimage.Scripts},
	{"internal/winseed", winseed.Scripts},
}

// files are the .ps1 files hwk ships, by where they are embedded.
var files = []struct {
	path string
	read func() ([]byte, error)
}{
	{"images/manifests/kube-proxy-windows-start.ps1", func() ([]byte, error) {
		return images.Manifests.ReadFile("manifests/kube-proxy-windows-start.ps1")
	}},
	{"node-images/windows/provision.ps1", func() ([]byte, error) { return windows.Recipe.ReadFile("provision.ps1") }},
	{"install.ps1", func() ([]byte, error) { return hwk.Installers.ReadFile("install.ps1") }},
}

// All is every script.
func All() ([]Script, error) {
	var out []Script
	for _, p := range packages {
		for key, text := range p.scripts() {
			out = append(out, Script{Source: p.path, Key: key, Text: text})
		}
	}
	for _, f := range files {
		b, err := f.read()
		if err != nil {
			return nil, err
		}
		out = append(out, Script{Source: f.path, Text: string(b)})
	}
	return out, nil
}
