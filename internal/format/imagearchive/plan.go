package imagearchive

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Selection picks one manifest of one image for a node, under the
// names it is to have there.
type Selection struct {
	Image    int
	Manifest int
	// Refs are the names to give it; empty means all of the image's.
	Refs []string
}

// ErrIncomplete is a selected manifest whose blobs the archive lacks.
var ErrIncomplete = errors.New("the archive lacks part of the image")

// HasBlob reports whether the archive holds the blob digest.
func (a *Archive) HasBlob(digest string) bool { return a.blobs[digest] != nil }

// Plan is the archive a node gets: its index and the blobs it needs.
type Plan struct {
	index []byte
	blobs map[string]bool
	// Bytes is how much the written archive holds, a little less than
	// Write's count (tar headers).
	Bytes int64
	// Images are, per selection, what of it the archive carries.
	Images []Carried
}

// Carried is what a plan's archive carries of one selection: the layers
// it sends and the bytes they and the image's manifest and config add
// (a layer two selections share counts for the first), and the layers it
// leaves out because the node has them.
type Carried struct {
	LayersSent, LayersReused int
	Bytes                    int64
}

// Have is what a node already holds: content by digest, and unpacked
// layer chains by chain ID. A layer it has either way need not be sent:
// containerd imports an archive that lacks it, taking the blob from its
// content store or skipping the unpack of a chain it has.
type Have interface {
	Blob(digest string) bool
	Snapshot(chainID string) bool
}

// ChainIDs returns the chain IDs of a stack of layers given by their diff
// IDs, base first (the OCI image spec's ChainID: the base's diff ID,
// then the digest of "parent chain ID, space, diff ID").
func ChainIDs(diffIDs []string) []string {
	out := make([]string, len(diffIDs))
	for i, d := range diffIDs {
		if i == 0 {
			out[i] = d
			continue
		}
		out[i] = digestOf([]byte(out[i-1] + " " + d))
	}
	return out
}

// Reused reports, per layer (base first), whether have holds it: its
// blob, or its chain unpacked (nil have holds nothing).
func Reused(have Have, layers []Layer) []bool {
	out := make([]bool, len(layers))
	if have == nil {
		return out
	}
	var diffIDs []string
	for _, l := range layers {
		diffIDs = append(diffIDs, l.DiffID)
	}
	chains := ChainIDs(diffIDs)
	known := true
	for i, l := range layers {
		// A chain is known only while every diff ID below it is.
		known = known && l.DiffID != ""
		out[i] = have.Blob(l.Digest) || (known && have.Snapshot(chains[i]))
	}
	return out
}

// Plan works out the archive of sels for a node that holds have (nil:
// nothing), which the archive then leaves out.
func (a *Archive) Plan(sels []Selection, have Have) (*Plan, error) {
	p := &Plan{blobs: map[string]bool{}}
	idx := index{SchemaVersion: 2, MediaType: mediaOCIIndex, Manifests: []descriptor{}}
	for _, s := range sels {
		im := a.Images[s.Image]
		m := im.Manifests[s.Manifest]
		refs := s.Refs
		if len(refs) == 0 {
			refs = im.Refs
		}
		var c Carried
		skip := map[string]bool{}
		for i, r := range Reused(have, m.Layers) {
			if r {
				skip[m.Layers[i].Digest] = true
				c.LayersReused++
			} else {
				c.LayersSent++
			}
		}
		// An archive may lack what the node holds (one made of what a
		// push sent), never anything else.
		for _, b := range m.blobs {
			if a.blobs[b] == nil && !skip[b] && (have == nil || !have.Blob(b)) {
				return nil, fmt.Errorf("%s (%s): %w: blob %s is not in it", im.Name(), m.Platform, ErrIncomplete, b)
			}
		}
		if m.raw == nil {
			return nil, fmt.Errorf("%s (%s): %w: manifest %s is not in it", im.Name(), m.Platform, ErrIncomplete, m.Digest)
		}
		p.blobs[m.Digest] = true
		for _, b := range m.blobs {
			if !p.blobs[b] && !skip[b] && a.blobs[b] != nil {
				p.blobs[b] = true
				p.Bytes += a.blobs[b].size
				c.Bytes += a.blobs[b].size
			}
		}
		p.Bytes += int64(len(m.raw))
		c.Bytes += int64(len(m.raw))
		p.Images = append(p.Images, c)
		plat := &ociPlatform{OS: m.Platform.OS, Architecture: m.Platform.Architecture, Variant: m.Platform.Variant, OSVersion: m.Platform.OSVersion}
		for _, ref := range refs {
			idx.Manifests = append(idx.Manifests, descriptor{
				MediaType: m.mediaType, Digest: m.Digest, Size: int64(len(m.raw)), Platform: plat,
				Annotations: map[string]string{annotationName: ref, annotationRefName: tagOf(ref)},
			})
		}
	}
	raw, err := json.Marshal(idx)
	if err != nil {
		return nil, err
	}
	p.index = raw
	return p, nil
}
