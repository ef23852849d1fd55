package imagearchive

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ociPlatform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant,omitempty"`
	OSVersion    string `json:"os.version,omitempty"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType,omitempty"`
	Manifests     []descriptor `json:"manifests"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType,omitempty"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type imageConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant,omitempty"`
	OSVersion    string `json:"os.version,omitempty"`
	RootFS       struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

func (c imageConfig) platform() Platform {
	return Platform{OS: c.OS, Architecture: c.Architecture, Variant: c.Variant, OSVersion: c.OSVersion}.Normalize()
}

// readOCI reads an OCI image layout: index.json names the images, each a
// manifest or an index of per-platform manifests.
func (a *Archive) readOCI() error {
	var idx index
	if err := jsonOf(a.entries["index.json"], "index.json", &idx); err != nil {
		return err
	}
	byDigest := map[string]int{}
	refs := map[int]map[string]bool{}
	for _, d := range idx.Manifests {
		if err := a.list(1); err != nil {
			return err
		}
		if d.Digest == "" {
			return formatErr("index.json: a manifest entry has no digest")
		}
		if err := checkDescriptor(d, "index.json"); err != nil {
			return err
		}
		i, ok := byDigest[d.Digest]
		if !ok {
			ms, err := a.manifests(d, 0)
			if err != nil {
				return err
			}
			a.Images = append(a.Images, Image{Digest: d.Digest, Manifests: ms})
			i = len(a.Images) - 1
			byDigest[d.Digest] = i
			refs[i] = map[string]bool{}
		}
		if ref := refFromAnnotations(d.Annotations); ref != "" && !refs[i][ref] {
			refs[i][ref] = true
			a.Images[i].Refs = append(a.Images[i].Refs, ref)
		}
	}
	return nil
}

// checkDescriptor refuses a descriptor (in where) whose digest is not
// one or whose size is negative: what names content by such a digest is
// not an image archive, and nothing should be looked up by it.
func checkDescriptor(d descriptor, where string) error {
	if !validDigest(d.Digest) {
		return formatErr("%s: %q is not a digest", where, d.Digest)
	}
	if d.Size < 0 {
		return formatErr("%s: %s has a negative size", where, d.Digest)
	}
	return nil
}

// index returns the index blob e (of digest d), parsed once.
func (a *Archive) index(d string, e *entry) (*index, error) {
	return parseOnce(a.indexes, d, e, "index "+d)
}

// manifest returns the manifest blob e (of digest d), parsed once.
func (a *Archive) manifest(d string, e *entry) (*manifest, error) {
	return parseOnce(a.parsed, d, e, "manifest "+d)
}

// config returns the image config entry e (what names it), parsed once.
func (a *Archive) config(e *entry, what string) (*imageConfig, error) {
	return parseOnce(a.configs, e.digest, e, what)
}

// parseOnce returns the JSON of entry e (what names it in an error) as a T,
// kept in cache under key so that it is parsed only once.
func parseOnce[T any](cache map[string]*T, key string, e *entry, what string) (*T, error) {
	if v := cache[key]; v != nil {
		return v, nil
	}
	v := new(T)
	if err := jsonOf(e, what, v); err != nil {
		return nil, err
	}
	cache[key] = v
	return v, nil
}

// manifests resolves a descriptor to the runnable manifests under it.
// Attestations and other non-image entries of an index are skipped.
func (a *Archive) manifests(d descriptor, depth int) ([]Manifest, error) {
	if depth > 4 {
		return nil, formatErr("indexes nested too deep at %s", d.Digest)
	}
	e := a.blobs[d.Digest]
	switch d.MediaType {
	case mediaOCIIndex, mediaDockerList:
		if e == nil {
			return nil, formatErr("archive lacks the index %s", d.Digest)
		}
		idx, err := a.index(d.Digest, e)
		if err != nil {
			return nil, err
		}
		var out []Manifest
		for _, c := range idx.Manifests {
			if err := a.list(1); err != nil {
				return nil, err
			}
			if c.Platform != nil && (c.Platform.OS == "unknown" || c.Platform.Architecture == "unknown") {
				continue // a build attestation, not an image
			}
			if err := checkDescriptor(c, "index "+d.Digest); err != nil {
				return nil, err
			}
			ms, err := a.manifests(c, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, ms...)
		}
		return out, nil
	case mediaOCIManifest, mediaDockerManifest:
	default:
		return nil, nil // a blob type hwk does not run (artifacts, signatures)
	}
	m := Manifest{Digest: d.Digest, mediaType: d.MediaType}
	if d.Platform != nil {
		m.Platform = Platform{OS: d.Platform.OS, Architecture: d.Platform.Architecture, Variant: d.Platform.Variant, OSVersion: d.Platform.OSVersion}.Normalize()
	}
	if e == nil {
		m.Missing = d.Digest
		return []Manifest{m}, nil
	}
	mf, err := a.manifest(d.Digest, e)
	if err != nil {
		return nil, err
	}
	if err := a.list(1 + len(mf.Layers)); err != nil {
		return nil, err
	}
	m.raw = e.data
	for _, b := range append([]descriptor{mf.Config}, mf.Layers...) {
		if err := checkDescriptor(b, "manifest "+d.Digest); err != nil {
			return nil, err
		}
		be := a.blobs[b.Digest]
		if be == nil {
			if m.Missing == "" {
				m.Missing = b.Digest
			}
		} else if be.size != b.Size {
			return nil, formatErr("archive is corrupt: manifest %s gives %s as %d bytes, the archive holds %d", d.Digest, b.Digest, b.Size, be.size)
		} else {
			m.Bytes += be.size
		}
		m.blobs = append(m.blobs, b.Digest)
	}
	m.Config = mf.Config.Digest
	var diffIDs []string
	if ce := a.blobs[mf.Config.Digest]; ce != nil {
		c, err := a.config(ce, "config "+mf.Config.Digest)
		if err != nil {
			return nil, err
		}
		// The config is the image's own word on its platform; an
		// index entry may leave os.version out.
		m.Platform = c.platform()
		diffIDs = c.RootFS.DiffIDs
	}
	for i, l := range mf.Layers {
		layer := Layer{Digest: l.Digest, Size: l.Size}
		if len(diffIDs) == len(mf.Layers) {
			layer.DiffID = diffIDs[i]
		}
		m.Layers = append(m.Layers, layer)
	}
	return []Manifest{m}, nil
}
