package download

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// fetch is one Fetch of a digest the cache does not have. Its bytes go to
// part, CacheDir/<algo>/.<hex>.part, as they arrive, so that they outlive
// a broken connection and the process. meta, beside it, records where
// they came from and which version of the file they are (partMeta).
type fetch struct {
	c                 *Client
	url               string
	want              Checksum
	final, part, meta string
}

// partMeta is what a partial file's bytes were the start of: the URL, and
// the validator the server gave for the file, which a resumed request
// sends as If-Range so that a server whose file changed since answers
// with the whole new file instead of a range of it.
type partMeta struct {
	URL          string `json:"url"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
}

// validator returns what If-Range carries. A weak ETag may not be used there
// (RFC 9110 13.1.5), so metaOf keeps only strong ones.
func (m partMeta) validator() string {
	if m.ETag != "" {
		return m.ETag
	}
	return m.LastModified
}

func metaOf(rawURL string, resp *http.Response) partMeta {
	m := partMeta{URL: rawURL, LastModified: resp.Header.Get("Last-Modified")}
	if etag := resp.Header.Get("ETag"); etag != "" && !strings.HasPrefix(etag, "W/") {
		m.ETag = etag
	}
	return m
}

// try makes one attempt: it goes on from the partial file if that can be
// trusted, else from zero, and renames the file into place once the whole of
// it has want's digest. A failure leaves the partial as it is (the bytes it
// has are good so far); a mismatch removes it.
func (d *fetch) try(ctx context.Context) error {
	f, err := os.OpenFile(d.part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("download %s: %w", d.url, err)
	}
	closed := false
	defer func() {
		if !closed {
			f.Close()
		}
	}()

	h := newHash(d.want.Algo)
	offset, meta, err := d.resumePoint(f, h)
	if err != nil {
		return fmt.Errorf("download %s: %w", d.url, err)
	}
	pw := &progressWriter{url: d.url, done: offset, total: -1, report: d.c.Progress}
	resumed := offset > 0
	// A process stopped between the last byte and the rename left the
	// whole file: there is nothing left to ask for.
	if offset == 0 || hex.EncodeToString(h.Sum(nil)) != d.want.Hex {
		resp, err := d.open(ctx, f, h, &offset, &meta)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		resumed = offset > 0
		pw.done, pw.total = offset, bodyEnd(resp, offset)
		body := &trackedReader{r: resp.Body}
		if _, err := io.Copy(io.MultiWriter(f, h, pw), body); err != nil {
			if body.err != nil {
				return readError(ctx, d.url, body.err)
			}
			return fmt.Errorf("download %s: %w", d.url, err)
		}
		if pw.total >= 0 && pw.done != pw.total {
			// A server may send less of a range than was asked for; the
			// next try asks for the rest.
			return &transientError{fmt.Errorf("download %s: the body ended after %d of %d bytes", d.url, pw.done, pw.total)}
		}
	}
	pw.finish()

	if got := hex.EncodeToString(h.Sum(nil)); got != d.want.Hex {
		// Resuming these bytes could only ever give the same wrong file.
		f.Close()
		closed = true
		d.drop()
		err := &MismatchError{URL: d.url, Want: d.want, Got: Checksum{Algo: d.want.Algo, Hex: got}}
		if resumed {
			// The bytes kept may be what is wrong, not the server's file:
			// a server that honours Range but not If-Range, a file
			// changed within Last-Modified's second, a tail a crash left
			// unwritten. The next try fetches the whole file.
			return &transientError{err}
		}
		return err
	}
	// The cache is shared like any other download, whatever the umask.
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("download %s: %w", d.url, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("download %s: %w", d.url, err)
	}
	closed = true
	if err := f.Close(); err != nil {
		return fmt.Errorf("download %s: %w", d.url, err)
	}
	if err := os.Rename(d.part, d.final); err != nil {
		// A process that takes no lock (an older hwk) may have put the
		// same verified file there first (on Windows, renaming over a
		// file someone has open fails).
		if !cached(d.final) {
			return fmt.Errorf("download %s: %w", d.url, err)
		}
		d.drop()
	}
	if err := os.Remove(d.meta); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("download %s: %w", d.url, err)
	}
	return nil
}

// resumePoint hashes the partial file's bytes into h and returns how many
// there are, with the meta they were fetched under, if a request can go on
// from them: they came from this URL under a validator. Otherwise it
// empties the file and returns 0.
func (d *fetch) resumePoint(f *os.File, h hash.Hash) (int64, partMeta, error) {
	var meta partMeta
	data, err := os.ReadFile(d.meta)
	if err == nil {
		err = json.Unmarshal(data, &meta)
	}
	if err != nil || meta.URL != d.url || meta.validator() == "" {
		// Bytes from another URL carry another server's validator, which
		// would be no check at all against this one.
		return 0, partMeta{}, d.restart(f, h)
	}
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, partMeta{}, fmt.Errorf("read partial download %s: %w", d.part, err)
	}
	return n, meta, nil
}

// open sends the request for the bytes from *offset on and returns the
// response whose body is to be appended at *offset. When the server will
// not go on from there (the file changed, it ignores ranges, or it
// answers some other range) it starts over, at most once: *offset becomes
// 0, the file and h are emptied, and *meta is the new answer's.
func (d *fetch) open(ctx context.Context, f *os.File, h hash.Hash, offset *int64, meta *partMeta) (*http.Response, error) {
	for {
		resp, err := d.c.getFrom(ctx, d.url, *offset, meta.validator())
		if err != nil {
			return nil, err
		}
		if *offset > 0 {
			if resp.StatusCode == http.StatusPartialContent {
				if start, _, _, ok := contentRange(resp.Header.Get("Content-Range")); ok && start == *offset {
					return resp, nil
				}
			}
			if resp.StatusCode != http.StatusOK {
				// 416, or a range that is not the one asked for: its body
				// is of no use, ask for the whole file.
				resp.Body.Close()
				*offset = 0
				if err := d.restart(f, h); err != nil {
					return nil, fmt.Errorf("download %s: %w", d.url, err)
				}
				continue
			}
			// 200: the server ignored the range, or the file changed;
			// this body is the whole file.
			*offset = 0
			if err := d.restart(f, h); err != nil {
				resp.Body.Close()
				return nil, fmt.Errorf("download %s: %w", d.url, err)
			}
		}
		*meta = metaOf(d.url, resp)
		if err := d.writeMeta(*meta); err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("download %s: %w", d.url, err)
		}
		return resp, nil
	}
}

// writeMeta records meta before any byte it covers is written, so that a
// partial file never has bytes from another version of the file than its
// meta names. Without a validator there is nothing to resume against, and
// no meta.
func (d *fetch) writeMeta(meta partMeta) error {
	if meta.validator() == "" {
		if err := os.Remove(d.meta); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	data, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	return os.WriteFile(d.meta, data, 0o644)
}

// restart empties the partial file and h, for a download from zero. The
// meta goes first: a file with bytes and no meta is never resumed.
func (d *fetch) restart(f *os.File, h hash.Hash) error {
	h.Reset()
	if err := os.Remove(d.meta); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.Seek(0, io.SeekStart)
	return err
}

// drop removes the partial file and its meta.
func (d *fetch) drop() {
	os.Remove(d.meta)
	os.Remove(d.part)
}

// dropUnlessResumable removes, after a Fetch failed, a partial file that
// a later one could not go on from, so that only useful bytes stay.
func (d *fetch) dropUnlessResumable() {
	var meta partMeta
	data, err := os.ReadFile(d.meta)
	if err == nil {
		err = json.Unmarshal(data, &meta)
	}
	fi, statErr := os.Stat(d.part)
	if err != nil || meta.validator() == "" || statErr != nil || fi.Size() == 0 {
		d.drop()
	}
}

// bodyEnd returns where the file ends after a body appended at offset, or -1
// if the server does not say.
func bodyEnd(resp *http.Response, offset int64) int64 {
	if resp.StatusCode == http.StatusPartialContent {
		if _, end, size, ok := contentRange(resp.Header.Get("Content-Range")); ok {
			if size >= 0 {
				return size
			}
			return end + 1
		}
	}
	if resp.ContentLength < 0 {
		return -1
	}
	return offset + resp.ContentLength
}

// contentRange parses a 206's "bytes first-last/size" (size may be "*",
// returned as -1).
func contentRange(v string) (first, last, size int64, ok bool) {
	spec, found := strings.CutPrefix(v, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, sizeText, found := strings.Cut(spec, "/")
	if !found {
		return 0, 0, 0, false
	}
	firstText, lastText, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, 0, false
	}
	first, err1 := strconv.ParseInt(firstText, 10, 64)
	last, err2 := strconv.ParseInt(lastText, 10, 64)
	size = -1
	var err3 error
	if sizeText != "*" {
		size, err3 = strconv.ParseInt(sizeText, 10, 64)
	}
	if err1 != nil || err2 != nil || err3 != nil || first < 0 || last < first || (size >= 0 && last >= size) {
		return 0, 0, 0, false
	}
	return first, last, size, true
}
