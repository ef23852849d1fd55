package imagedist

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
	"oras.land/oras-go/v2/registry"

	"github.com/hwk-dev/hwk/node-images"
)

// Pins are the published Linux node images this hwk build pulls by
// default (node-images/published.yaml).
type Pins struct {
	// Registry is where they are published, and Repository their name
	// under it: Registry/Repository@Digest.
	Registry   string `yaml:"registry"`
	Repository string `yaml:"repository"`
	Images     []Pin  `yaml:"images"`
}

// Pin is one Kubernetes version's image. An empty Digest is a version
// not published yet.
type Pin struct {
	KubernetesVersion string `yaml:"kubernetesVersion"`
	Digest            string `yaml:"digest"`
}

// Published reads the pins this hwk was built with.
func Published() (*Pins, error) { return ParsePins(nodeimages.Published) }

// ParsePins decodes and checks a pin file.
func ParsePins(data []byte) (*Pins, error) {
	var p Pins
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("node image pins: %w", err)
	}
	if _, err := registry.ParseReference(p.Registry + "/" + p.Repository + ":x"); err != nil {
		return nil, fmt.Errorf("node image pins: %s/%s is not a repository: %w", p.Registry, p.Repository, err)
	}
	for i, im := range p.Images {
		if im.KubernetesVersion == "" {
			// SetPin could not find it, nor Ref ask for it.
			return nil, fmt.Errorf("node image pins: images[%d] has no kubernetesVersion", i)
		}
		if im.Digest == "" {
			continue
		}
		if _, err := registry.ParseReference(p.Registry + "/" + p.Repository + "@" + im.Digest); err != nil {
			return nil, fmt.Errorf("node image pins: %s: %w", im.KubernetesVersion, err)
		}
	}
	return &p, nil
}

// NotPublishedError is a Kubernetes version this hwk pins no published
// node image for.
type NotPublishedError struct {
	Version string
	// Pinned lists the versions that are published.
	Pinned []string
}

func (e *NotPublishedError) Error() string {
	if len(e.Pinned) == 0 {
		return fmt.Sprintf("this hwk build pins no published node image for Kubernetes %s (it was built before any was published)", e.Version)
	}
	return fmt.Sprintf("this hwk build pins no published node image for Kubernetes %s (it pins %s)", e.Version, strings.Join(e.Pinned, ", "))
}

// Ref returns the reference of version's pinned image, tag and digest, from
// registryHost when it is not empty (a mirror, which keeps digests) or
// else from where it was published.
func (p *Pins) Ref(version, registryHost string) (string, error) {
	reg := p.Registry
	if registryHost != "" {
		reg = strings.TrimSuffix(registryHost, "/")
	}
	var published []string
	for _, im := range p.Images {
		if im.Digest == "" {
			continue
		}
		published = append(published, im.KubernetesVersion)
		if im.KubernetesVersion == version {
			ref := fmt.Sprintf("%s/%s:%s@%s", reg, p.Repository, version, im.Digest)
			if _, err := registry.ParseReference(ref); err != nil {
				return "", fmt.Errorf("images.registry %q: %w", registryHost, err)
			}
			return ref, nil
		}
	}
	return "", &NotPublishedError{Version: version, Pinned: published}
}

// SetPin rewrites a pin file (its bytes) so that version's image is
// digest, adding the version when it is new, and keeps every comment:
// what the publishing workflow runs after a push.
func SetPin(data []byte, version, digest string) ([]byte, error) {
	p, err := ParsePins(data)
	if err != nil {
		return nil, err
	}
	if _, err := registry.ParseReference(p.Registry + "/" + p.Repository + "@" + digest); err != nil {
		return nil, fmt.Errorf("%s is not a digest: %w", digest, err)
	}
	return rewrite(data, func(doc *yaml.Node) error {
		images := mapValue(doc.Content[0], "images")
		if images == nil || images.Kind != yaml.SequenceNode {
			return fmt.Errorf("node image pins: no images list")
		}
		found := false
		for _, im := range images.Content {
			if v := mapValue(im, "kubernetesVersion"); v != nil && v.Value == version {
				setValue(resolve(im), "digest", digest)
				found = true
			}
		}
		if found {
			return nil
		}
		item := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, kv := range [][2]string{{"kubernetesVersion", version}, {"digest", digest}} {
			item.Content = append(item.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: kv[0]},
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: kv[1]})
		}
		images.Content = append(images.Content, item)
		return nil
	}, func(got *Pins) bool {
		for _, im := range got.Images {
			if im.KubernetesVersion == version && im.Digest == digest {
				return true
			}
		}
		return false
	}, "pin "+version, "set the pin by hand")
}

// SetRepository rewrites a pin file (its bytes) so that its images are at
// repository (REGISTRY/NAME, as `hwk node-image push` was given it),
// keeping every comment. Every pin moves with it, so publish every version
// there first.
func SetRepository(data []byte, repository string) ([]byte, error) {
	// Why: the publishing workflow runs it when it pushed somewhere other
	// than where the file names (a local registry under `make workflows`).
	if _, err := ParsePins(data); err != nil {
		return nil, err
	}
	i := strings.LastIndex(repository, "/")
	if i <= 0 || i == len(repository)-1 {
		return nil, fmt.Errorf("%q is not REGISTRY/NAME", repository)
	}
	reg, name := repository[:i], repository[i+1:]
	if _, err := registry.ParseReference(reg + "/" + name + ":x"); err != nil {
		return nil, fmt.Errorf("%q is not a repository: %w", repository, err)
	}
	return rewrite(data, func(doc *yaml.Node) error {
		setValue(resolve(doc.Content[0]), "registry", reg)
		setValue(resolve(doc.Content[0]), "repository", name)
		return nil
	}, func(got *Pins) bool { return got.Registry == reg && got.Repository == name },
		"name "+repository, "set registry and repository by hand")
}

// rewrite decodes a pin file as a YAML tree, lets change edit it, writes
// it back and checks that it still parses and that done holds (the file
// now does what); fix is what the user can do instead.
func rewrite(data []byte, change func(*yaml.Node) error, done func(*Pins) bool, what, fix string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("node image pins: the file is empty")
	}
	if err := change(&doc); err != nil {
		return nil, err
	}
	var out strings.Builder
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	written := []byte(out.String())
	// Why check: the YAML library does not write every document back as it
	// read it (an anchor whose name ends in a colon comes back as a
	// mapping key).
	got, err := ParsePins(written)
	if err != nil {
		return nil, fmt.Errorf("the pin file, rewritten, would not parse; %s: %w", fix, err)
	}
	if !done(got) {
		return nil, fmt.Errorf("node image pins: the rewritten file does not %s; %s", what, fix)
	}
	return written, nil
}

// mapValue returns key's value in the mapping m, aliases followed as a
// decoder follows them.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	m = resolve(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if resolve(m.Content[i]).Value == key {
			return resolve(m.Content[i+1])
		}
	}
	return nil
}

// setValue sets key's value in the mapping m to the string s, adding the
// key when m lacks it. The value node is replaced, keeping its comments,
// rather than changed: through an alias, it may be another key's value.
func setValue(m *yaml.Node, key, s string) {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if resolve(m.Content[i]).Value == key {
			old := m.Content[i+1]
			n.HeadComment, n.LineComment, n.FootComment = old.HeadComment, old.LineComment, old.FootComment
			m.Content[i+1] = n
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, n)
}

// resolve returns the node an alias stands for (n itself when not an alias).
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// CheckRegistry checks an images.registry setting: a registry host with an
// optional path, no tag, no scheme.
func CheckRegistry(s string) error {
	if strings.Contains(s, "://") {
		return fmt.Errorf("%q has a scheme; give the host and path only, such as ghcr.io/hwk-dev or 127.0.0.1:5000/hwk", s)
	}
	if _, err := registry.ParseReference(strings.TrimSuffix(s, "/") + "/node:v1"); err != nil {
		return fmt.Errorf("%q is not a registry and path, such as ghcr.io/hwk-dev or 127.0.0.1:5000/hwk", s)
	}
	return nil
}

// WindowsLicence is the reminder hwk prints whenever a Windows node image
// leaves or enters the cache.
const WindowsLicence = "Windows Server may not be redistributed: keep Windows node images in your organisation's private registry or files, never in a public one."
