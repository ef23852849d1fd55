package nodeimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// formatOf is the node image format each driver boots.
var formatOf = map[string]Format{
	"docker":     FormatDocker,
	"libvirt":    FormatQCOW2,
	"hyperv":     FormatVHDX,
	"virtualbox": FormatVDI,
	"wsl2":       FormatTar,
}

// FormatFor returns the format the driver called driver boots nodes from;
// ok is false for a driver it does not know.
func FormatFor(driver string) (Format, bool) {
	f, ok := formatOf[driver]
	return f, ok
}

// ParseFormats checks a comma-separated list of formats (a --formats
// flag) and returns them in Formats' order, without repeats.
func ParseFormats(s string) ([]Format, error) {
	var out []Format
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(Formats, Format(f)) {
			return nil, fmt.Errorf("%q is not a node image format; use %s", f, formatList())
		}
		if !slices.Contains(out, Format(f)) {
			out = append(out, Format(f))
		}
	}
	slices.SortFunc(out, func(a, b Format) int { return slices.Index(Formats, a) - slices.Index(Formats, b) })
	return out, nil
}

// JoinFormats returns formats as messages list them: "qcow2, vhdx".
func JoinFormats(fs []Format) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// FormatsOf returns the formats the manifest lists, in Formats' order.
func (m *Manifest) FormatsOf() []Format {
	var out []Format
	for _, f := range Formats {
		if _, ok := m.Artifacts[f]; ok {
			out = append(out, f)
		}
	}
	return out
}

// ImagesDir returns where the cache keeps node images, one directory each.
func ImagesDir(cacheDir string) string { return filepath.Join(cacheDir, "node-images") }

// CheckName returns an error for a name that could not be a directory of
// the cache (a path, "..", an empty name): config's rule for node image
// names.
func CheckName(name string) error { return config.CheckImageName(name) }

// FilePath returns where a file format's artifact is.
func (m *Manifest) FilePath(f Format) string {
	a, ok := m.Artifacts[f]
	if !ok || a.Path == "" {
		return ""
	}
	return filepath.Join(m.Dir, a.Path)
}

// Has reports whether the image's artifact of format f is still where
// the manifest records: the file with its size, or the image in the Docker
// engine with this image's key (docker connects to it; nil means no
// engine).
func (m *Manifest) Has(ctx context.Context, f Format, docker func() (client.APIClient, error)) bool {
	a, ok := m.Artifacts[f]
	if !ok {
		return false
	}
	if f == FormatDocker {
		if docker == nil {
			return false
		}
		c, err := docker()
		if err != nil {
			return false
		}
		img, err := c.ImageInspect(ctx, a.DockerImage)
		return err == nil && img.Config != nil && img.Config.Labels[LabelKey] == m.Key
	}
	st, err := os.Stat(filepath.Join(m.Dir, a.Path))
	return err == nil && st.Size() == a.Size
}

// Select finds one cached image for a command that takes an image by
// name or by Kubernetes version (the newest image of that version and
// OS); what is "" means the newest of the default version, def.
func Select(list []*Manifest, what string, os string, def string) (*Manifest, error) {
	if what == "" {
		what = def
	}
	byVersion := kubernetesVersion.MatchString(what)
	for _, m := range list { // newest first
		if m.Name == what || (byVersion && m.KubernetesVersion == what && m.OS == os) {
			return m, nil
		}
	}
	var names []string
	for _, m := range list {
		names = append(names, m.Name)
	}
	have := "the cache holds no node images"
	if len(names) > 0 {
		have = "the cache holds " + strings.Join(names, ", ")
	}
	if byVersion {
		return nil, fmt.Errorf("no cached %s node image for Kubernetes %s (%s); see `hwk node-image list`", os, what, have)
	}
	return nil, fmt.Errorf("no cached node image is called %q (%s); see `hwk node-image list`", what, have)
}
