package actions

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/testing/driverstest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// TestImagePullPolicy checks which node images up takes from the cache and
// which it pulls, by policy and by the node's image setting.
func TestImagePullPolicy(t *testing.T) {
	cache := t.TempDir()
	const pulledRef = "registry.example.com/hwk/node:v1.35.4@sha256:dd3d3637cd11522a839fa6e89a8dde86f5aec19c96aba007a2492da8a9f94e53"
	image := func(name string, origin *nodeimage.Origin) *nodeimage.Manifest {
		m := &nodeimage.Manifest{Name: name, OS: "linux", KubernetesVersion: "v1.35.4", Dir: filepath.Join(cache, name), Origin: origin,
			Artifacts: map[nodeimage.Format]nodeimage.Artifact{nodeimage.FormatQCOW2: {Path: "disk.qcow2"}}}
		if err := os.MkdirAll(m.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(m.FilePath(nodeimage.FormatQCOW2), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return m
	}
	built := image("linux-built", nil)
	pulled := image("linux-pulled", &nodeimage.Origin{Ref: pulledRef})
	cached := []*nodeimage.Manifest{built, pulled} // newest first
	lv := driverstest.Up(config.DriverLibvirt)

	plan := func(pull PullPolicy, n config.Node) (string, string, error) {
		n.Name, n.Driver = "n1", config.DriverLibvirt
		if n.OS == "" {
			n.OS = config.Linux
		}
		c := &Context{Config: &config.Cluster{KubernetesVersion: "v1.35.4"}, Drivers: map[string]drivers.Driver{"n1": lv}, Pull: pull}
		ref, err := c.cachedImage(context.Background(), cached, n, lv, nodeimage.FormatQCOW2)
		if err != nil || ref != "" {
			return ref, "", err
		}
		from, err := c.pullRef(n, nodeimage.FormatQCOW2, lv)
		return "", from, err
	}
	for _, tc := range []struct {
		name        string
		pull        PullPolicy
		node        config.Node
		cached, ref string
		err         string
	}{
		{name: "missing: the newest cached image", pull: PullMissing, cached: built.FilePath(nodeimage.FormatQCOW2)},
		{name: "missing: a cached name", pull: PullMissing, node: config.Node{Image: "linux-pulled"}, cached: pulled.FilePath(nodeimage.FormatQCOW2)},
		{name: "missing: a reference pulled before, by tag", pull: PullMissing, node: config.Node{Image: "registry.example.com/hwk/node:v1.35.4"}, cached: pulled.FilePath(nodeimage.FormatQCOW2)},
		{name: "missing: a reference pulled before, by digest", pull: PullMissing, node: config.Node{Image: "registry.example.com/hwk/node@sha256:dd3d3637cd11522a839fa6e89a8dde86f5aec19c96aba007a2492da8a9f94e53"}, cached: pulled.FilePath(nodeimage.FormatQCOW2)},
		{name: "missing: a reference never pulled", pull: PullMissing, node: config.Node{Image: "registry.example.com/hwk/node:v1.35.5"}, ref: "registry.example.com/hwk/node:v1.35.5"},
		{name: "missing: an unknown name", pull: PullMissing, node: config.Node{Image: "linux-gone"}, err: `no cached node image called "linux-gone"`},
		{name: "always: a reference is pulled", pull: PullAlways, node: config.Node{Image: "registry.example.com/hwk/node:v1.35.4"}, ref: "registry.example.com/hwk/node:v1.35.4"},
		{name: "always: the pinned image, not published here", pull: PullAlways, err: "pins no published node image for Kubernetes v1.35.4"},
		{name: "never: the cache", pull: PullNever, cached: built.FilePath(nodeimage.FormatQCOW2)},
		{name: "never: a reference never pulled", pull: PullNever, node: config.Node{Image: "registry.example.com/hwk/node:v1.35.5"}, err: "(--pull=never)"},
		{name: "windows: never pulled by default", pull: PullAlways, node: config.Node{OS: config.Windows, WindowsVersion: "2022"}, err: "Windows images are never downloaded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cachedRef, ref, err := plan(tc.pull, tc.node)
			switch {
			case tc.err != "":
				var ni *nodeimage.NoImageError
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("got %q, %q, %v; want an error with %q", cachedRef, ref, err, tc.err)
				} else if !strings.Contains(tc.err, "linux-gone") && !errors.As(err, &ni) {
					t.Errorf("%T is not a NoImageError", err)
				}
			case cachedRef != tc.cached || ref != tc.ref:
				t.Errorf("cache %q, pull %q (%v); want cache %q, pull %q", cachedRef, ref, err, tc.cached, tc.ref)
			}
		})
	}
}
