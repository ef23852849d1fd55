package imagearchive

import (
	"archive/tar"
	"fmt"
	"io"
)

// Filtered is what Filter read and what it left out.
type Filtered struct {
	*Archive
	// Skipped are the blobs Filter did not pass on.
	Skipped map[string]bool
}

// Filter copies the image archive src to dst as it is read, leaving out the
// blobs skip reports the reader has, and describes the whole archive as Scan
// does. A passed-on blob whose content does not match its name fails the
// copy, as does an entry leading outside the archive, before any of it is
// passed on. On any error dst ends in bytes no tar reader accepts (Poison).
func Filter(dst io.Writer, src io.Reader, skip func(digest string) bool) (f *Filtered, err error) {
	out := &errWriter{w: dst}
	defer func() {
		if err != nil {
			if out.err != nil {
				// dst's own failure (its reader stopped) is the cause.
				err = out.err
			}
			// Why: dst's reader never takes a cut-short archive for a
			// whole one, so a failed Filter leaves it with nothing
			// imported.
			Poison(dst)
		}
	}()
	tr, err := openTar(src)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(out)
	s := newScanner()
	defer s.release()
	f = &Filtered{Skipped: map[string]bool{}}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, formatErr("not a readable tar archive: %v", err)
		}
		// Checked before anything of the entry is passed on.
		name, err := entryName(h)
		if err != nil {
			return nil, err
		}
		// Why this suits the OCI layouts Docker 25 and later save, in both
		// of its stores: their blobs are named by digest, so Filter
		// decides on each before reading it, and nothing is held back or
		// read twice. Entries that are not blobs named by digest (a
		// classic docker save's layer directories) are always passed on,
		// hashed on the way.
		d, isBlob := blobDigest(name)
		if !isBlob || h.Typeflag != tar.TypeReg || !skip(d) {
			if err := tw.WriteHeader(h); err != nil {
				return nil, fmt.Errorf("pass on %s: %w", h.Name, err)
			}
			if err := s.read(h, tr, tw); err != nil {
				return nil, err
			}
			continue
		}
		f.Skipped[d] = true
		if h.Size <= smallEntry {
			// Manifests and configs are small and the description
			// needs them: read, but do not pass on.
			if err := s.read(h, tr, io.Discard); err != nil {
				return nil, err
			}
			continue
		}
		if err := s.claim(name); err != nil {
			return nil, err
		}
		// A large blob left out is read past without being hashed:
		// nothing of it goes anywhere.
		n, err := io.CopyBuffer(io.Discard, tr, s.buf)
		if err != nil || n != h.Size {
			return nil, formatErr("archive is cut short or unreadable in %s: %v", h.Name, err)
		}
		s.add(&entry{name: name, size: h.Size, digest: d})
	}
	// The archive is described before its end is written: one that
	// fails here must not reach the reader as a whole archive.
	a, err := s.finish()
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	f.Archive = a
	return f, nil
}

// Carried returns what the filtered archive passed on of the image named ref:
// the layers of its complete manifests that went and those left out, and
// the bytes of what went of them, their configs and manifests.
func (f *Filtered) Carried(ref string) Carried {
	var c Carried
	seen := map[string]bool{}
	for _, im := range f.Images {
		if !contains(im.Refs, ref) {
			continue
		}
		for _, m := range im.Manifests {
			if m.Missing != "" {
				continue
			}
			for _, l := range m.Layers {
				if f.Skipped[l.Digest] {
					c.LayersReused++
				} else {
					c.LayersSent++
				}
			}
			for _, b := range append([]string{m.Digest}, m.blobs...) {
				if e := f.blobs[b]; e != nil && !seen[b] && !f.Skipped[b] {
					seen[b] = true
					c.Bytes += e.size
				}
			}
		}
		break
	}
	return c
}

// errWriter keeps the first error its writer returned.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}
