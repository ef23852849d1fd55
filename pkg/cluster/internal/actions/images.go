package actions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/nodeimage/imagedist"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// PullPolicy is when `up` pulls node images.
type PullPolicy string

// The pull policies, as kind and Kubernetes name them.
const (
	// PullMissing pulls an image only when the cache has none that fits.
	PullMissing PullPolicy = "missing"
	// PullAlways asks the registry every time, and uses what it names
	// (downloading only what the cache does not hold already).
	PullAlways PullPolicy = "always"
	// PullNever uses the cache only.
	PullNever PullPolicy = "never"
)

// pull is one node image `up` pulls, and the nodes it is for.
type pull struct {
	ref     string
	image   *imagedist.Image
	formats []nodeimage.Format
	nodes   []config.Node
}

// planImages finds each node's image in the cache, in its driver's
// format, or else plans a pull of it and asks the registry for it, so
// that an image that cannot be had stops `up` before anything is made.
func (c *Context) planImages(ctx context.Context, cached []*nodeimage.Manifest) error {
	c.Images = map[string]string{}
	byRef := map[string]*pull{}
	c.pulls = nil
	for _, n := range c.Config.Nodes {
		d := c.Drivers[n.Name]
		format, ok := nodeimage.FormatFor(d.Name())
		if !ok {
			return fmt.Errorf("node %s: driver %s boots from no node image format hwk knows", n.Name, d.Name())
		}
		ref, err := c.cachedImage(ctx, cached, n, d, format)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		if ref != "" {
			c.Images[n.Name] = ref
			continue
		}
		from, err := c.pullRef(n, format, d)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		p := byRef[from]
		if p == nil {
			p = &pull{ref: from}
			byRef[from] = p
			c.pulls = append(c.pulls, p)
		}
		if !slices.Contains(p.formats, format) {
			p.formats = append(p.formats, format)
		}
		p.nodes = append(p.nodes, n)
	}
	for _, p := range c.pulls {
		n := p.nodes[0]
		im, err := c.imageRegistry().Resolve(ctx, p.ref)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, &nodeimage.NoImageError{Node: n, Version: c.Config.KubernetesVersion, Format: p.formats[0], Driver: c.Drivers[n.Name].Name(), Ref: p.ref, Err: err})
		}
		if err := fits(im, p, c.Config.KubernetesVersion); err != nil {
			return err
		}
		p.image = im
	}
	return nil
}

// noteImage keeps what a node's seed needs of its image: a Windows
// image's language, which Setup on the clone is told.
func (c *Context) noteImage(n config.Node, m *nodeimage.Manifest) {
	if n.OS != config.Windows || m.Windows == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locales == nil {
		c.locales = map[string]string{}
	}
	c.locales[n.Name] = m.Windows.Locale
}

// fits checks that a resolved image is one the nodes can boot.
func fits(im *imagedist.Image, p *pull, version string) error {
	m := im.Manifest
	for _, n := range p.nodes {
		switch {
		case m.OS != string(n.OS):
			return fmt.Errorf("node %s: %s is a %s node image, and the node runs %s", n.Name, im.Ref, m.OS, n.OS)
		case m.KubernetesVersion != version:
			return fmt.Errorf("node %s: %s is for Kubernetes %s, and the cluster runs %s; pull an image for %s or set kubernetesVersion: %s",
				n.Name, im.Ref, m.KubernetesVersion, version, version, m.KubernetesVersion)
		case n.OS == config.Windows && (m.Windows == nil || m.Windows.Version != n.WindowsVersion):
			return fmt.Errorf("node %s: %s is not a Windows Server %s image", n.Name, im.Ref, n.WindowsVersion)
		}
	}
	var missing []string
	for _, f := range p.formats {
		if !slices.Contains(im.Formats(), f) {
			missing = append(missing, string(f))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("node %s: %s has no %s format (it has %s), which driver %s boots from", p.nodes[0].Name, im.Ref,
			strings.Join(missing, ", "), nodeimage.JoinFormats(im.Formats()), p.nodes[0].Driver)
	}
	return nil
}

// cachedImage returns the node's image in its driver's terms when the cache
// (or, for the docker driver, the engine) has one that fits and the pull
// policy lets `up` use it; "" when it must be pulled.
func (c *Context) cachedImage(ctx context.Context, cached []*nodeimage.Manifest, n config.Node, d drivers.Driver, format nodeimage.Format) (string, error) {
	explicit := config.IsImageRef(n.Image)
	if c.Pull == PullAlways && (explicit || n.OS == config.Linux) {
		return "", nil
	}
	version := c.Config.KubernetesVersion
	var ref string
	for _, m := range cached { // newest first
		if m.OS != string(n.OS) || m.KubernetesVersion != version {
			continue
		}
		switch {
		case explicit && (m.Origin == nil || !sameImage(m.Origin.Ref, n.Image)):
			continue
		case !explicit && n.Image != "" && m.Name != n.Image:
			continue
		}
		// A Windows node runs the Windows Server release it asks for.
		if n.OS == config.Windows && (m.Windows == nil || m.Windows.Version != n.WindowsVersion) {
			continue
		}
		a, ok := m.Artifacts[format]
		if !ok {
			continue
		}
		if format == nodeimage.FormatDocker {
			ref = a.DockerImage
			break
		}
		if m.Has(ctx, format, nil) {
			ref = m.FilePath(format)
			c.noteImage(n, m)
			break
		}
	}
	if ref == "" && format == nodeimage.FormatDocker && !explicit {
		// The engine may hold an image built under another cache
		// directory (with sudo, say); the engine has the last word.
		ref = n.Image
		if ref == "" {
			ref = nodeimage.DockerRepository + ":" + version
		}
	}
	if ref == "" {
		return "", nil
	}
	if ic, ok := d.(drivers.ImageChecker); ok {
		if err := ic.CheckImage(ctx, ref); err != nil {
			var missing *drivers.ImageMissingError
			if errors.As(err, &missing) {
				return "", nil
			}
			return "", err
		}
	}
	return ref, nil
}

// sameImage reports whether a pulled image's reference (repository, tag,
// digest) is what a node's image setting names: the same repository, and
// the same digest or tag, whichever the setting gives.
func sameImage(pulled, want string) bool {
	p, err1 := reference.ParseNormalizedNamed(pulled)
	w, err2 := reference.ParseNormalizedNamed(want)
	if err1 != nil || err2 != nil || p.Name() != w.Name() {
		return false
	}
	if wd, ok := w.(reference.Digested); ok {
		pd, ok := p.(reference.Digested)
		return ok && pd.Digest() == wd.Digest()
	}
	wt, ok1 := w.(reference.Tagged)
	pt, ok2 := p.(reference.Tagged)
	return ok1 && ok2 && wt.Tag() == pt.Tag()
}

// pullRef returns what `up` pulls for a node the cache has no image for: the
// reference its config names, else the Linux image this hwk pins for the
// cluster's version (from images.registry when set). Windows images are
// never pulled unless a config names one.
func (c *Context) pullRef(n config.Node, format nodeimage.Format, d drivers.Driver) (string, error) {
	version := c.Config.KubernetesVersion
	noImage := &nodeimage.NoImageError{Node: n, Version: version, Format: format, Driver: d.Name()}
	switch {
	case c.Pull == PullNever:
		noImage.Err = errors.New("--pull=never")
		return "", noImage
	case config.IsImageRef(n.Image):
		return n.Image, nil
	case n.Image != "":
		return "", fmt.Errorf("no cached node image called %q has the %s format the %s driver needs\n  fix: see `hwk node-image list` for the images there are", n.Image, format, d.Name())
	case n.OS == config.Windows:
		return "", noImage
	}
	pins, err := imagedist.Published()
	if err != nil {
		return "", err
	}
	ref, err := pins.Ref(version, c.Config.Images.Registry)
	if err != nil {
		noImage.Err = err
		return "", noImage
	}
	return ref, nil
}

func (c *Context) imageRegistry() *imagedist.Registry {
	if c.ImageRegistry == nil {
		c.ImageRegistry = &imagedist.Registry{}
	}
	return c.ImageRegistry
}

// PullImages downloads the node images Preflight found missing, only the
// formats the nodes' drivers boot from, and gives each node its image.
type PullImages struct{}

// Name implements Action.
func (PullImages) Name() string { return "Pulling node images" }

// Skip implements Skipper: nothing to pull, no step.
func (PullImages) Skip(c *Context) bool { return len(c.pulls) == 0 }

// Describe implements Describer: the step names what it pulls.
func (PullImages) Describe(c *Context) string {
	var what []string
	for _, p := range c.pulls {
		var fs []string
		for _, f := range p.formats {
			fs = append(fs, string(f))
		}
		what = append(what, fmt.Sprintf("%s (%s)", p.image.Ref, strings.Join(fs, ", ")))
	}
	return "Pulling node image " + strings.Join(what, ", ")
}

// Execute implements Action.
func (PullImages) Execute(ctx context.Context, c *Context) error {
	var progress imagedist.Progress
	if c.Status != nil {
		t := ui.NewTransfers(c.Status, nil)
		defer t.Stop()
		progress = t.Update
	}
	for _, p := range c.pulls {
		m, err := p.image.Unpack(ctx, imagedist.UnpackOptions{CacheDir: c.CacheDir, Formats: p.formats, Docker: c.Docker, Progress: progress})
		if err != nil {
			return fmt.Errorf("%w\n  fix: run `hwk up` again to go on from what was downloaded, or get the image another way:\n%s",
				err, nodeimage.WaysForward(p.nodes[0], c.Config.KubernetesVersion, p.formats[0]))
		}
		for _, n := range p.nodes {
			format, _ := nodeimage.FormatFor(c.Drivers[n.Name].Name())
			if format == nodeimage.FormatDocker {
				c.Images[n.Name] = m.Artifacts[format].DockerImage
			} else {
				c.Images[n.Name] = m.FilePath(format)
			}
			c.noteImage(n, m)
		}
	}
	return nil
}
