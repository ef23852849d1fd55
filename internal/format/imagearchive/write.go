package imagearchive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
)

// Write writes the plan's archive, an OCI image layout in a tar, to w,
// copying blobs from src, the scanned archive read again from its start.
// A blob whose content differs from the scan fails the write; w then ends
// in bytes no tar reader accepts (see Poison), so that what reads it
// cannot mistake a cut-short archive for a whole one.
func (a *Archive) Write(w io.Writer, src io.Reader, p *Plan) (err error) {
	defer func() {
		if err != nil {
			Poison(w)
		}
	}()
	tw := tar.NewWriter(w)
	add := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o444, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add("oci-layout", []byte(ociLayout)); err != nil {
		return err
	}
	if err := add("index.json", p.index); err != nil {
		return err
	}
	written := map[string]bool{}
	// Manifests hwk holds in memory (every manifest it wrote for a
	// classic archive, and any it read) go first.
	var mdigests []string
	for d := range p.blobs {
		mdigests = append(mdigests, d)
	}
	sort.Strings(mdigests)
	for _, d := range mdigests {
		raw := a.manifestJSON(d)
		if raw == nil {
			continue
		}
		if err := add(blobName(d), raw); err != nil {
			return err
		}
		written[d] = true
	}
	tr, err := openTar(src)
	if err != nil {
		return err
	}
	buf := copyBufs.Get().(*[1 << 20]byte)
	defer copyBufs.Put(buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read the archive again: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		e := a.entries[cleanName(h.Name)]
		if e == nil || !p.blobs[e.digest] || written[e.digest] || e.size != h.Size {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: blobName(e.digest), Mode: 0o444, Size: e.size, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		hash := sha256.New()
		if _, err := io.CopyBuffer(io.MultiWriter(tw, hash), tr, buf[:]); err != nil {
			return fmt.Errorf("copy %s: %w", h.Name, err)
		}
		if got := "sha256:" + hex.EncodeToString(hash.Sum(nil)); got != e.digest {
			return fmt.Errorf("the archive changed since it was read: %s now has digest %s", h.Name, got)
		}
		written[e.digest] = true
	}
	for d := range p.blobs {
		if !written[d] {
			return fmt.Errorf("the archive changed since it was read: blob %s is gone", d)
		}
	}
	return tw.Close()
}

// manifestJSON returns the JSON of a manifest the archive holds, by digest.
func (a *Archive) manifestJSON(d string) []byte {
	for _, im := range a.Images {
		for _, m := range im.Manifests {
			if m.Digest == d {
				return m.raw
			}
		}
	}
	return nil
}

// ociLayout is an OCI image layout's oci-layout file.
const ociLayout = `{"imageLayoutVersion":"1.0.0"}`

// Pack writes an OCI image layout tar to w holding one image manifest,
// raw (of mediaType), named refs, and those of its config and layers that
// blob opens; a blob it reports as fs.ErrNotExist is left out (the reader
// holds it already).
func Pack(w io.Writer, mediaType string, raw []byte, refs []string, blob func(digest string) (io.ReadCloser, int64, error)) error {
	var mf manifest
	if err := json.Unmarshal(raw, &mf); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if mf.Config.Digest == "" {
		return fmt.Errorf("a %s, not an image manifest", mediaType)
	}
	d := digestOf(raw)
	idx := index{SchemaVersion: 2, MediaType: mediaOCIIndex}
	for _, ref := range refs {
		idx.Manifests = append(idx.Manifests, descriptor{MediaType: mediaType, Digest: d, Size: int64(len(raw)),
			Annotations: map[string]string{annotationName: ref, annotationRefName: tagOf(ref)}})
	}
	ix, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	add := func(name string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o444, Size: size, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"oci-layout", []byte(ociLayout)}, {"index.json", ix}, {blobName(d), raw}} {
		if err := add(f.name, int64(len(f.data)), bytes.NewReader(f.data)); err != nil {
			return err
		}
	}
	done := map[string]bool{}
	for _, l := range append([]descriptor{mf.Config}, mf.Layers...) {
		if done[l.Digest] {
			continue
		}
		done[l.Digest] = true
		rc, size, err := blob(l.Digest)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		err = add(blobName(l.Digest), size, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// Poison ends a stream that is being read as a tar with bytes no tar
// reader takes for a header or for the end of the archive, so that a
// reader given a stream cut off between two entries fails rather than
// taking what it got for the whole archive.
func Poison(w io.Writer) {
	junk := bytes.Repeat([]byte{0xff}, 2*512)
	_, _ = w.Write(junk)
}
