package imagedist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Progress receives how each transfer goes: name is what (a format, a
// blob), done and total are bytes. A resumed download starts at the bytes
// it already had.
type Progress func(name string, done, total int64)

// DigestError is content whose digest is not the one it was asked for.
type DigestError struct {
	What      string
	Want, Got digest.Digest
	// Size and Want size, when they differ.
	Size, WantSize int64
}

func (e *DigestError) Error() string {
	if e.Size != e.WantSize {
		return fmt.Sprintf("%s: got %d bytes, want %d (%s); nothing of it was kept", e.What, e.Size, e.WantSize, e.Want)
	}
	return fmt.Sprintf("%s: content has digest %s, want %s; nothing of it was kept", e.What, e.Got, e.Want)
}

// attempts is how often a download is tried in one run, each try going on
// from the bytes the last one got.
const attempts = 3

// retryWait is the pause before another try; tests shorten it.
var retryWait = 2 * time.Second

// source is where a pull reads content: a registry, or an archive.
type source interface {
	// fetch returns desc's content from offset on, and the offset it
	// really starts at (0 when the source cannot start mid-blob).
	fetch(ctx context.Context, desc ocispec.Descriptor, offset int64) (io.ReadCloser, int64, error)
	// resumable reports whether downloads from it are worth keeping on disk
	// while they run, so that a later pull can go on from them.
	resumable() bool
}

// netError marks a failure to read from the source (as opposed to the
// consumer's), which another try may get past.
type netError struct{ err error }

func (e *netError) Error() string { return e.err.Error() }
func (e *netError) Unwrap() error { return e.err }

// taggedReader marks its errors as the source's.
type taggedReader struct{ r io.Reader }

func (t *taggedReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		err = &netError{err}
	}
	return n, err
}

// countingReader reports bytes as they pass, once past base (the bytes
// a resumed download had on disk, which it reports first and at once).
type countingReader struct {
	r        io.Reader
	n, base  int64
	progress func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if n > 0 && c.n > c.base && c.progress != nil {
		c.progress(c.n)
	}
	return n, err
}

// download streams desc from src into consume, checking every byte's
// digest, and returns the verified blob's path when keep is set. From a
// resumable source it keeps the bytes in dir/<digest>.partial, so a broken
// download goes on later; each try calls consume with the whole blob, the
// part on disk first. A blob of the wrong digest is deleted with its partial.
func download(ctx context.Context, src source, desc ocispec.Descriptor, dir, what string, keep bool, progress func(int64), consume func(io.Reader) error) (string, error) {
	if err := desc.Digest.Validate(); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if consume == nil {
		consume = func(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err }
	}
	if !src.resumable() {
		return downloadOnce(ctx, src, desc, dir, what, keep, progress, consume)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// The caller holds the image's lock, so no other hwk writes here.
	final := filepath.Join(dir, desc.Digest.Encoded())
	partial := final + ".partial"
	if keep && verifiedFile(final, desc) {
		// A whole blob a run that was stopped afterwards left behind.
		return final, nil
	}

	var last error
	for try := 0; try < attempts; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(retryWait):
			}
		}
		err := downloadTry(ctx, src, desc, partial, what, progress, consume)
		var ne *netError
		if err == nil {
			if keep {
				return final, os.Rename(partial, final)
			}
			return "", os.Remove(partial)
		}
		if !errors.As(err, &ne) || ctx.Err() != nil {
			return "", err
		}
		last = err
	}
	have := int64(0)
	if st, err := os.Stat(partial); err == nil {
		have = st.Size()
	}
	return "", fmt.Errorf("%s: %w (%d of %d bytes kept; run the command again to go on from there)", what, last, have, desc.Size)
}

func downloadTry(ctx context.Context, src source, desc ocispec.Descriptor, partial, what string, progress func(int64), consume func(io.Reader) error) error {
	have := int64(0)
	if st, err := os.Stat(partial); err == nil {
		have = st.Size()
	}
	if have > desc.Size {
		have = 0
	}
	rc, from, err := src.fetch(ctx, desc, have)
	if err != nil {
		return &netError{err}
	}
	defer rc.Close()
	f, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(from); err != nil {
		return err
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return err
	}
	// What is on disk, then the rest as it arrives (written to disk as it
	// passes, so it outlives this process).
	body := &taggedReader{r: io.LimitReader(rc, desc.Size-from+1)}
	r := io.MultiReader(io.NewSectionReader(f, 0, from), io.TeeReader(body, f))
	return verify(desc, what, r, from, progress, consume, func() { _ = os.Remove(partial) })
}

func downloadOnce(ctx context.Context, src source, desc ocispec.Descriptor, dir, what string, keep bool, progress func(int64), consume func(io.Reader) error) (string, error) {
	rc, _, err := src.fetch(ctx, desc, 0)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer rc.Close()
	r := io.LimitReader(rc, desc.Size+1)
	if !keep {
		return "", verify(desc, what, r, 0, progress, consume, func() {})
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	final := filepath.Join(dir, desc.Digest.Encoded())
	f, err := os.CreateTemp(dir, desc.Digest.Encoded()+".*.tmp")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := verify(desc, what, io.TeeReader(r, f), 0, progress, consume, func() {}); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return final, os.Rename(f.Name(), final)
}

// verify feeds r to consume while hashing it, then checks size and
// digest. When consume stops early it reads the rest itself, so that a
// corrupt blob is reported as such rather than as whatever the consumer
// made of it.
func verify(desc ocispec.Descriptor, what string, r io.Reader, base int64, progress func(int64), consume func(io.Reader) error, discard func()) error {
	h := desc.Digest.Algorithm().Hash()
	cr := &countingReader{r: io.TeeReader(r, h), base: base, progress: progress}
	if progress != nil {
		progress(base)
	}
	cerr := consume(cr)
	var ne *netError
	if errors.As(cerr, &ne) {
		return cerr
	}
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return err
	}
	got := digest.NewDigest(desc.Digest.Algorithm(), h)
	if cr.n != desc.Size || got != desc.Digest {
		discard()
		return &DigestError{What: what, Want: desc.Digest, Got: got, Size: cr.n, WantSize: desc.Size}
	}
	return cerr
}

// verifiedFile reports whether the file at p is desc's content.
func verifiedFile(p string, desc ocispec.Descriptor) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	h := desc.Digest.Algorithm().Hash()
	n, err := io.Copy(h, f)
	return err == nil && n == desc.Size && digest.NewDigest(desc.Digest.Algorithm(), h) == desc.Digest
}
