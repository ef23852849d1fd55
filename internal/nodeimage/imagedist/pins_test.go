package imagedist

import (
	"errors"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/node-images"
)

const testDigest = "sha256:dd3d3637cd11522a839fa6e89a8dde86f5aec19c96aba007a2492da8a9f94e53"

// TestPublishedPinsParse checks that the pin file this build carries is
// well formed and pins every Kubernetes minor hwk supports (with or
// without a digest).
func TestPublishedPinsParse(t *testing.T) {
	p, err := Published()
	if err != nil {
		t.Fatal(err)
	}
	if p.Registry != "ghcr.io/hwk-dev" || p.Repository != "node" {
		t.Errorf("published at %s/%s", p.Registry, p.Repository)
	}
	for _, minor := range []string{"v1.34.", "v1.35.", "v1.36."} {
		found := false
		for _, im := range p.Images {
			found = found || strings.HasPrefix(im.KubernetesVersion, minor)
		}
		if !found {
			t.Errorf("no pin for %sx", minor)
		}
	}
}

// TestPinRef checks that a pinned version's reference carries tag and
// digest, from a mirror when one is set, and that a version without a
// digest, or not pinned at all, gets an error naming what is pinned.
func TestPinRef(t *testing.T) {
	data, err := SetPin(mustPublished(t), "v1.35.4", testDigest)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePins(data)
	if err != nil {
		t.Fatal(err)
	}
	for reg, want := range map[string]string{
		"":                         "ghcr.io/hwk-dev/node:v1.35.4@" + testDigest,
		"127.0.0.1:5000/hwk":       "127.0.0.1:5000/hwk/node:v1.35.4@" + testDigest,
		"registry.example.com/m/":  "registry.example.com/m/node:v1.35.4@" + testDigest,
		"localhost:5000/hwk-dev/x": "localhost:5000/hwk-dev/x/node:v1.35.4@" + testDigest,
	} {
		got, err := p.Ref("v1.35.4", reg)
		if err != nil || got != want {
			t.Errorf("Ref(v1.35.4, %q) = %q, %v; want %q", reg, got, err, want)
		}
		if _, err := ParseRef(got); err != nil {
			t.Errorf("%s does not parse back: %v", got, err)
		}
	}
	for _, v := range []string{"v1.34.4", "v1.33.0"} {
		_, err := p.Ref(v, "")
		var np *NotPublishedError
		if !errors.As(err, &np) || !strings.Contains(err.Error(), "it pins v1.35.4") {
			t.Errorf("Ref(%s) = %v", v, err)
		}
	}
	empty, _ := ParsePins(mustPublished(t))
	if _, err := empty.Ref("v1.35.4", ""); err == nil || !strings.Contains(err.Error(), "before any was published") {
		t.Errorf("no digests at all: %v", err)
	}
}

// TestSetPinKeepsComments checks that the workflow's rewrite changes the
// digest and nothing else, or adds a version at the end.
func TestSetPinKeepsComments(t *testing.T) {
	orig := string(mustPublished(t))
	out, err := SetPin([]byte(orig), "v1.35.4", testDigest)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(orig, "  - kubernetesVersion: v1.35.4\n    digest: \"\"", "  - kubernetesVersion: v1.35.4\n    digest: "+testDigest, 1)
	if string(out) != want {
		t.Errorf("rewrite changed more than the digest:\n%s", out)
	}
	out, err = SetPin(out, "v1.37.0", testDigest)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(out), "  - kubernetesVersion: v1.37.0\n    digest: "+testDigest+"\n") || !strings.Contains(string(out), "# Windows node images are never published") {
		t.Errorf("adding a version:\n%s", out)
	}
	if _, err := SetPin(out, "v1.35.4", "latest"); err == nil {
		t.Error("a digest that is not one was pinned")
	}
}

func TestCheckRegistry(t *testing.T) {
	for _, ok := range []string{"ghcr.io/hwk-dev", "127.0.0.1:5000/hwk", "localhost:5000", "registry.example.com"} {
		if err := CheckRegistry(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"https://ghcr.io/hwk-dev", "ghcr.io/HWK", "ghcr.io/hwk:tag"} {
		if err := CheckRegistry(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// mustPublished returns the pin file this build carries.
func mustPublished(t *testing.T) []byte {
	t.Helper()
	if _, err := Published(); err != nil {
		t.Fatal(err)
	}
	return nodeimages.Published
}
