package bootstrap

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"text/template"

	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// RuntimeClassName returns the RuntimeClass for Windows Server version v.
func RuntimeClassName(v string) string { return "windows-" + v }

// Windows images as the embedded manifests use them (see images/windows.yaml).
const (
	CalicoNodeWindowsImage = "quay.io/calico/node-windows:" + CalicoVersion
	CalicoCNIWindowsImage  = "quay.io/calico/cni-windows:" + CalicoVersion
)

// The Windows DaemonSets WindowsManifests makes, in kube-system.
const (
	CalicoNodeWindows = "calico-node-windows"
	KubeProxyWindows  = "kube-proxy-windows"
)

// KubeProxyWindowsImage returns the HostProcess image that carries
// kube-proxy.exe for Kubernetes version v.
func KubeProxyWindowsImage(v string) string {
	return "docker.io/sigwindowstools/kube-proxy:" + v + "-calico-hostprocess"
}

// WindowsManifests returns the objects Windows nodes need before the first one
// joins: Calico's Windows DaemonSet and its config, kube-proxy's Windows
// DaemonSet with hwk's start script, and a RuntimeClass per Windows build.
// They select Windows nodes only, so applying them to a Linux-only cluster
// changes nothing until a Windows node appears.
func WindowsManifests(c Cluster) ([]byte, error) {
	var out bytes.Buffer
	calico, err := renderManifest("calico-node-windows.yaml", map[string]any{
		"DNSServiceIP":  c.DNSServiceIP(),
		"DNSDomain":     DNSDomain,
		"ServiceSubnet": c.ServiceSubnet,
		"APIServerHost": c.ControlPlane.IP,
		"APIServerPort": c.APIServerPort,
		"VXLANVNI":      c.VXLANVNI,
		"NodeImage":     CalicoNodeWindowsImage,
		"CNIImage":      CalicoCNIWindowsImage,
	})
	if err != nil {
		return nil, err
	}
	out.Write(calico)

	start, err := images.Manifests.ReadFile("manifests/kube-proxy-windows-start.ps1")
	if err != nil {
		return nil, err
	}
	proxy, err := renderManifest("kube-proxy-windows.yaml", map[string]any{
		"StartScript": string(start),
		"Image":       KubeProxyWindowsImage(c.KubernetesVersion),
	})
	if err != nil {
		return nil, err
	}
	out.WriteString("---\n")
	out.Write(proxy)

	type build struct{ Name, Build string }
	var builds []build
	for v, b := range config.WindowsBuilds {
		builds = append(builds, build{RuntimeClassName(v), b})
	}
	sort.Slice(builds, func(i, j int) bool { return builds[i].Name < builds[j].Name })
	rc, err := renderManifest("runtimeclass-windows.yaml", map[string]any{"Builds": builds})
	if err != nil {
		return nil, err
	}
	out.WriteString("---\n")
	out.Write(rc)
	return out.Bytes(), nil
}

var manifestFuncs = template.FuncMap{
	// indent prefixes every line of s with n spaces (for a block scalar).
	"indent": func(n int, s string) string {
		pad := strings.Repeat(" ", n)
		return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
	},
}

func renderManifest(name string, data any) ([]byte, error) {
	src, err := images.Manifests.ReadFile("manifests/" + name)
	if err != nil {
		return nil, err
	}
	t, err := template.New(name).Funcs(manifestFuncs).Option("missingkey=error").Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	return b.Bytes(), nil
}
