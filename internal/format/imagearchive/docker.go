package imagearchive

import (
	"encoding/hex"
	"encoding/json"
	"strings"
)

// dockerManifestEntry is one image of a classic docker save's manifest.json.
type dockerManifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// readDocker reads a classic docker save: manifest.json lists each image's
// config file, tags and layer tars. hwk writes a manifest for each, as
// containerd's importer would, so that every archive reaches a node as an
// OCI layout.
func (a *Archive) readDocker() error {
	var entries []dockerManifestEntry
	if err := jsonOf(a.entries["manifest.json"], "manifest.json", &entries); err != nil {
		return err
	}
	for _, de := range entries {
		if err := a.list(1 + len(de.Layers) + len(de.RepoTags)); err != nil {
			return err
		}
		ce := a.entries[cleanName(de.Config)]
		if ce == nil {
			return formatErr("archive lacks %s, the config manifest.json names", de.Config)
		}
		c, err := a.config(ce, "config "+de.Config)
		if err != nil {
			return err
		}
		if d, ok := legacyConfigDigest(de.Config); ok && d != ce.digest {
			return formatErr("archive is corrupt: %s holds content with digest %s", de.Config, ce.digest)
		}
		if len(c.RootFS.DiffIDs) != len(de.Layers) {
			return formatErr("archive is corrupt: %s lists %d layers, manifest.json %d", de.Config, len(c.RootFS.DiffIDs), len(de.Layers))
		}
		mf := manifest{SchemaVersion: 2, MediaType: mediaOCIManifest,
			Config: descriptor{MediaType: mediaOCIConfig, Digest: ce.digest, Size: ce.size}}
		a.blobs[ce.digest] = ce
		m := Manifest{Platform: c.platform(), Config: ce.digest, Bytes: ce.size, mediaType: mediaOCIManifest}
		m.blobs = append(m.blobs, ce.digest)
		for i, l := range de.Layers {
			le := a.entries[cleanName(l)]
			if le == nil {
				return formatErr("archive lacks the layer %s that manifest.json names", l)
			}
			if le.digest != c.RootFS.DiffIDs[i] {
				// A compressed layer's digest is not its diff ID; only
				// an uncompressed one can be checked against the config.
				if layerMediaType(le.head) == mediaLayerTar {
					return formatErr("archive is corrupt: layer %s has digest %s, its config expects %s", l, le.digest, c.RootFS.DiffIDs[i])
				}
			}
			a.blobs[le.digest] = le
			mf.Layers = append(mf.Layers, descriptor{MediaType: layerMediaType(le.head), Digest: le.digest, Size: le.size})
			m.blobs = append(m.blobs, le.digest)
			m.Layers = append(m.Layers, Layer{Digest: le.digest, DiffID: c.RootFS.DiffIDs[i], Size: le.size})
			m.Bytes += le.size
		}
		raw, err := json.Marshal(mf)
		if err != nil {
			return err
		}
		m.raw = raw
		m.Digest = digestOf(raw)
		im := Image{Digest: ce.digest, Manifests: []Manifest{m}}
		seen := map[string]bool{}
		for _, t := range de.RepoTags {
			if ref, err := normalizeRef(t); err == nil && !seen[ref] {
				seen[ref] = true
				im.Refs = append(im.Refs, ref)
			}
		}
		a.Images = append(a.Images, im)
	}
	return nil
}

// legacyConfigDigest returns the digest a classic config file's name carries
// (<hex>.json, or blobs/sha256/<hex> in Docker 25's compatible
// manifest.json).
func legacyConfigDigest(name string) (string, bool) {
	name = cleanName(name)
	if d, ok := blobDigest(name); ok {
		return d, true
	}
	hexPart := strings.TrimSuffix(name, ".json")
	if len(hexPart) != 64 || strings.Contains(hexPart, "/") {
		return "", false
	}
	if _, err := hex.DecodeString(hexPart); err != nil {
		return "", false
	}
	return "sha256:" + hexPart, true
}

func layerMediaType(head []byte) string {
	switch {
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		return mediaLayerGzip
	case len(head) >= 4 && head[0] == 0x28 && head[1] == 0xb5 && head[2] == 0x2f && head[3] == 0xfd:
		return mediaLayerZstd
	}
	return mediaLayerTar
}
