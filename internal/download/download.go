// Package download fetches release artifacts over HTTP into a
// content-addressed cache, checking each against its published checksum.
package download

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"time"
)

// Client downloads into a cache. The zero value, with CacheDir set, is
// ready to use.
type Client struct {
	HTTP *http.Client // nil means http.DefaultClient
	// CacheDir holds one file per digest, CacheDir/<algo>/<hex>, so a file
	// there has been verified and any URL with that digest can reuse it.
	// Beside it, dot files that start with .<hex>. are a download under
	// way or broken off, and its lock.
	CacheDir string
	// Progress, if set, is told how a download is going: at most about
	// every 100ms, and once at the end with done == total. total is -1
	// while the server has not said how long the body is. done counts the
	// bytes a resumed download had already; it goes back to 0 when the
	// server makes a download start over.
	Progress func(url string, done, total int64)
}

// MismatchError is the error of a download, or a file for Verify, that did
// not have the digest it should. For Verify, URL is the file's path.
type MismatchError struct {
	URL       string
	Want, Got Checksum
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("checksum mismatch for %s: want %s, got %s", e.URL, e.Want, e.Got)
}

// StatusError is an answer other than 2xx, so that a caller can tell a
// file the server does not have (404) from other failures and say what
// to do about it.
type StatusError struct {
	URL    string
	Code   int
	Status string // as the server gave it, e.g. "404 Not Found"
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("download %s: server answered %s", e.URL, e.Status)
}

const (
	attempts        = 3
	maxChecksumSize = 1 << 20
	progressEvery   = 100 * time.Millisecond
)

// retryDelay is the wait before the second attempt, doubled before each
// later one. Tests shorten it.
var retryDelay = 500 * time.Millisecond

// transientError marks a failure worth another attempt: a network error or
// a 5xx answer.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// Fetch downloads rawURL into the cache and returns the cached file's path,
// with no request if want's digest is cached. It never leaves a partial or
// wrong file under a digest's name: a mismatch returns a *MismatchError. A
// broken download resumes in a later try or Fetch, of any process, while
// the server's validator holds. One Fetch of a digest runs at a time.
func (c *Client) Fetch(ctx context.Context, rawURL string, want Checksum) (string, error) {
	want, err := want.normalize()
	if err != nil {
		return "", fmt.Errorf("download %s: %w", rawURL, err)
	}
	if c.CacheDir == "" {
		return "", fmt.Errorf("download %s: no cache directory set", rawURL)
	}
	dir := filepath.Join(c.CacheDir, want.Algo)
	final := filepath.Join(dir, want.Hex)
	if cached(final) {
		return final, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("download %s: %w", rawURL, err)
	}
	lock, err := lockDigest(ctx, filepath.Join(dir, "."+want.Hex+".lock"), want)
	if err != nil {
		return "", fmt.Errorf("download %s: %w", rawURL, err)
	}
	defer lock.Remove()
	// Whoever held the lock before us may have fetched it.
	if cached(final) {
		return final, nil
	}
	// The body streams into part and is renamed to final only once the
	// whole file's digest matches; it resumes from part when the server
	// named a validator (a strong ETag or Last-Modified) that still holds.
	d := &fetch{
		c: c, url: rawURL, want: want, final: final,
		part: filepath.Join(dir, "."+want.Hex+".part"),
		meta: filepath.Join(dir, "."+want.Hex+".part.json"),
	}
	if err := c.retry(ctx, func() error { return d.try(ctx) }); err != nil {
		d.dropUnlessResumable()
		return "", err
	}
	return final, nil
}

func cached(final string) bool {
	fi, err := os.Stat(final)
	return err == nil && fi.Mode().IsRegular()
}

// FetchVerified fetches the checksum file at sumURL, takes from it the
// digest for the artifact called name, and fetches rawURL against that
// digest. The algorithm comes from sumURL's suffix (.sha256, .sha256sum,
// .sha512 or .sha512sum).
func (c *Client) FetchVerified(ctx context.Context, rawURL, sumURL, name string) (string, Checksum, error) {
	u, err := url.Parse(sumURL)
	if err != nil {
		return "", Checksum{}, fmt.Errorf("checksum URL %s: %w", sumURL, err)
	}
	file := path.Base(u.Path)
	algo, err := algoFromName(file)
	if err != nil {
		return "", Checksum{}, err
	}
	var data []byte
	err = c.retry(ctx, func() error {
		resp, err := c.get(ctx, sumURL)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, err = io.ReadAll(io.LimitReader(resp.Body, maxChecksumSize+1))
		if err != nil {
			return readError(ctx, sumURL, err)
		}
		if len(data) > maxChecksumSize {
			return fmt.Errorf("download %s: checksum file larger than %d bytes", sumURL, maxChecksumSize)
		}
		return nil
	})
	if err != nil {
		return "", Checksum{}, err
	}
	sum, err := parseChecksumFile(data, algo, name, file)
	if err != nil {
		return "", Checksum{}, fmt.Errorf("checksum for %s from %s: %w", rawURL, sumURL, err)
	}
	p, err := c.Fetch(ctx, rawURL, sum)
	return p, sum, err
}

// Verify checks that the file at path has the digest want; if not, the
// error is a *MismatchError. It leaves a bad file in place for the caller
// to deal with.
func Verify(path string, want Checksum) error {
	want, err := want.normalize()
	if err != nil {
		return fmt.Errorf("verify %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("verify %s: %w", path, err)
	}
	defer f.Close()
	h := newHash(want.Algo)
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("verify %s: %w", path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want.Hex {
		return &MismatchError{URL: path, Want: want, Got: Checksum{Algo: want.Algo, Hex: got}}
	}
	return nil
}

// retry runs try up to attempts times, waiting between tries, for as long
// as it fails with a transientError and ctx lives.
func (c *Client) retry(ctx context.Context, try func() error) error {
	delay := retryDelay
	for n := 1; ; n++ {
		err := try()
		var t *transientError
		if err == nil || !errors.As(err, &t) {
			return err
		}
		if n == attempts {
			return fmt.Errorf("%w (gave up after %d attempts)", t.err, n)
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w (%w before attempt %d)", t.err, context.Cause(ctx), n+1)
		case <-timer.C:
		}
		delay *= 2
	}
}

// get sends a GET and returns the response if it is a 2xx. A failure to
// get an answer, or a 5xx, is a transientError; the caller closes the body.
func (c *Client) get(ctx context.Context, rawURL string) (*http.Response, error) {
	return c.getFrom(ctx, rawURL, 0, "")
}

// getFrom does get, asking for the bytes from offset on, if offset is not 0,
// and only if validator still names the file the server has (If-Range); it
// then also returns a 416 answer, for the caller to start over.
func (c *Client) getFrom(ctx context.Context, rawURL string, offset int64, validator string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", rawURL, err)
	}
	// The bytes as stored, never compressed on the fly: a compressed
	// answer has its own ETag and length, so a partial of it could not be
	// resumed, and the digest is of the stored file.
	req.Header.Set("Accept-Encoding", "identity")
	if offset > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(offset, 10)+"-")
		req.Header.Set("If-Range", validator)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		// *url.Error repeats the method and URL; ours names them once.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, readError(ctx, rawURL, err)
	}
	if offset > 0 && resp.StatusCode == http.StatusRequestedRangeNotSatisfiable {
		return resp, nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		resp.Body.Close()
		err := &StatusError{URL: rawURL, Code: resp.StatusCode, Status: resp.Status}
		if resp.StatusCode >= 500 {
			return nil, &transientError{err}
		}
		return nil, err
	}
	return resp, nil
}

// readError wraps a network failure, as transient unless ctx has ended, in
// which case the cancellation is the cause worth reporting.
func readError(ctx context.Context, rawURL string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("download %s: %w", rawURL, context.Cause(ctx))
	}
	return &transientError{fmt.Errorf("download %s: %w", rawURL, err)}
}

// trackedReader remembers a read error, so that a failing network can be
// told apart from a failing disk after io.Copy.
type trackedReader struct {
	r   io.Reader
	err error
}

func (t *trackedReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}

// progressWriter counts bytes and reports them, no more than every
// progressEvery.
type progressWriter struct {
	url         string
	done, total int64
	last        time.Time
	report      func(url string, done, total int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if p.report != nil && time.Since(p.last) >= progressEvery {
		p.last = time.Now()
		p.report(p.url, p.done, p.total)
	}
	return len(b), nil
}

// finish makes the final report; by then the length is known even if the
// server never said it.
func (p *progressWriter) finish() {
	if p.report != nil {
		p.report(p.url, p.done, p.done)
	}
}
