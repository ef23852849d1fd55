package download

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rangeServer serves one file the way release hosts do: with a validator,
// and ranges when If-Range still matches it. Its faults are switched on
// per test.
type rangeServer struct {
	t   *testing.T
	url string

	mu           sync.Mutex
	body         []byte
	etag         string // "" sends none
	lastModified string // "" sends none
	// dropAfter[i] > 0: request i (from 0) gets that many body bytes,
	// then the connection drops.
	dropAfter map[int]int
	// holdAfter[i] > 0: request i gets that many body bytes, then the
	// body stays open until the client goes away.
	holdAfter   map[int]int
	ignoreRange bool // answer every request with the whole file
	ignoreIf    bool // answer a range request whatever its If-Range holds
	refuseRange bool // answer every range request with 416
	wrongStart  bool // answer a range request with bytes 0-
	rangeLimit  int  // > 0: send at most this many bytes of a range
	requests    []http.Header
	served      int64 // body bytes written, all requests
}

func newRangeServer(t *testing.T, body []byte) *rangeServer {
	s := &rangeServer{t: t, body: body, etag: `"v1"`, dropAfter: map[int]int{}, holdAfter: map[int]int{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.url = srv.URL + "/kube-apiserver"
	return s
}

func (s *rangeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := len(s.requests)
	s.requests = append(s.requests, r.Header.Clone())
	body, etag, lastModified := s.body, s.etag, s.lastModified
	drop, hold := s.dropAfter[i], s.holdAfter[i]
	ignore, ignoreIf, refuse, wrong, limit := s.ignoreRange, s.ignoreIf, s.refuseRange, s.wrongStart, s.rangeLimit
	s.mu.Unlock()

	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	if lastModified != "" {
		w.Header().Set("Last-Modified", lastModified)
	}
	status, start, size := http.StatusOK, 0, len(body)
	rng := r.Header.Get("Range")
	ifRange := r.Header.Get("If-Range")
	if rng != "" && !ignore && (ignoreIf || ifRange == "" || (ifRange == etag && !strings.HasPrefix(etag, "W/")) || ifRange == lastModified) {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rng, "bytes="), "-"))
		if err != nil {
			s.t.Errorf("range %q is not bytes=N-", rng)
		}
		if refuse || n >= len(body) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		if wrong {
			n = 0
		}
		end := len(body)
		if limit > 0 {
			end = min(end, n+limit)
		}
		status, start, body = http.StatusPartialContent, n, body[:end]
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, end-1, size))
	}
	out := body[start:]
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(status)
	if cut := max(drop, hold); cut > 0 && cut < len(out) {
		w.Write(out[:cut])
		s.count(cut)
		w.(http.Flusher).Flush()
		if hold > 0 {
			<-r.Context().Done()
		}
		panic(http.ErrAbortHandler) // drops the connection
	}
	w.Write(out)
	s.count(len(out))
}

func (s *rangeServer) count(n int) {
	s.mu.Lock()
	s.served += int64(n)
	s.mu.Unlock()
}

func (s *rangeServer) set(f func(s *rangeServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// got returns the requests' headers and the body bytes served so far.
func (s *rangeServer) got() ([]http.Header, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.requests...), s.served
}

// checkRequest fails unless h asked for the bytes from offset on (no
// range at all for 0) under ifRange.
func checkRequest(t *testing.T, i int, h http.Header, offset int, ifRange string) {
	t.Helper()
	wantRange := ""
	if offset > 0 {
		wantRange = fmt.Sprintf("bytes=%d-", offset)
	}
	if got := h.Get("Range"); got != wantRange {
		t.Errorf("request %d: Range %q, want %q", i, got, wantRange)
	}
	if got := h.Get("If-Range"); got != ifRange {
		t.Errorf("request %d: If-Range %q, want %q", i, got, ifRange)
	}
	if got := h.Get("Accept-Encoding"); got != "identity" {
		t.Errorf("request %d: Accept-Encoding %q, want identity", i, got)
	}
}

// interrupt runs a Fetch that is cancelled once cut bytes of the file are
// on disk, as when hwk is stopped mid-download, and checks that it left
// those bytes to go on from.
func interrupt(t *testing.T, s *rangeServer, cacheDir string, want Checksum, cut int) {
	t.Helper()
	s.set(func(s *rangeServer) { s.holdAfter[len(s.requests)] = cut })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := (&Client{CacheDir: cacheDir}).Fetch(ctx, s.url, want)
		errc <- err
	}()
	part := filepath.Join(cacheDir, want.Algo, "."+want.Hex+".part")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if fi, err := os.Stat(part); err == nil && fi.Size() >= int64(cut) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached %d bytes", part, cut)
		}
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted fetch: got %v, want context.Canceled", err)
	}
	fi, err := os.Stat(part)
	if err != nil {
		t.Fatalf("no partial download left: %v", err)
	}
	if fi.Size() != int64(cut) {
		t.Fatalf("partial download has %d bytes, want %d", fi.Size(), cut)
	}
}

func TestFetchResumes(t *testing.T) {
	const date = "Tue, 03 Mar 2026 10:00:00 GMT"
	for _, tt := range []struct {
		desc, etag, lastModified, ifRange string
	}{
		{desc: "strong ETag", etag: `"abc"`, lastModified: date, ifRange: `"abc"`},
		{desc: "Last-Modified only", lastModified: date, ifRange: date},
		{desc: "weak ETag is not a validator", etag: `W/"abc"`, lastModified: date, ifRange: date},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			s := newRangeServer(t, payload)
			const cut = 100000
			s.set(func(s *rangeServer) {
				s.etag, s.lastModified = tt.etag, tt.lastModified
				s.dropAfter[0] = cut
			})
			type call struct{ done, total int64 }
			var calls []call
			c := &Client{CacheDir: t.TempDir(), Progress: func(_ string, done, total int64) {
				calls = append(calls, call{done, total})
			}}
			want := sha256Of(payload)
			reqs, served := fetchPayload(t, c, s, want, 2)
			checkRequest(t, 0, reqs[0], 0, "")
			checkRequest(t, 1, reqs[1], cut, tt.ifRange)
			if served != int64(len(payload)) {
				t.Errorf("server sent %d bytes for a %d-byte file", served, len(payload))
			}

			// Progress counts the bytes kept from the first try: it never
			// goes back, and knows the size all along.
			size := int64(len(payload))
			if len(calls) < 2 || calls[len(calls)-1] != (call{size, size}) {
				t.Fatalf("progress calls %v, want several ending with done == total == %d", calls, size)
			}
			for i, cl := range calls {
				if cl.total != size || (i > 0 && cl.done < calls[i-1].done) {
					t.Errorf("progress calls %v: call %d is off", calls, i)
					break
				}
			}
		})
	}
}

func TestFetchResumesAcrossClients(t *testing.T) {
	s := newRangeServer(t, payload)
	dir := t.TempDir()
	want := sha256Of(payload)
	const cut = 200000
	interrupt(t, s, dir, want, cut)

	// A new Client, as a later hwk would make, goes on from the partial.
	c := &Client{CacheDir: dir}
	reqs, served := fetchPayload(t, c, s, want, 2)
	checkRequest(t, 1, reqs[1], cut, `"v1"`)
	if served != int64(len(payload)) {
		t.Errorf("server sent %d bytes for a %d-byte file", served, len(payload))
	}
}

func TestFetchServerIgnoresRange(t *testing.T) {
	s := newRangeServer(t, payload)
	const cut = 100000
	s.set(func(s *rangeServer) {
		s.dropAfter[0] = cut
		s.ignoreRange = true
	})
	c := &Client{CacheDir: t.TempDir()}
	reqs, served := fetchPayload(t, c, s, sha256Of(payload), 2)
	// It did ask for a range, and took the whole file it got instead.
	checkRequest(t, 1, reqs[1], cut, `"v1"`)
	if served != int64(cut+len(payload)) {
		t.Errorf("server sent %d bytes, want %d", served, cut+len(payload))
	}
}

func TestFetchValidatorChanged(t *testing.T) {
	// The host had another file under this URL when the first download
	// broke off; the bytes kept are the start of that one.
	old := []byte(strings.Repeat("an older build of the artifact\n", 20000))
	s := newRangeServer(t, old)
	dir := t.TempDir()
	want := sha256Of(payload)
	const cut = 150000
	interrupt(t, s, dir, want, cut)

	s.set(func(s *rangeServer) { s.body, s.etag = payload, `"v2"` })
	c := &Client{CacheDir: dir}
	reqs, _ := fetchPayload(t, c, s, want, 2)
	checkRequest(t, 1, reqs[1], cut, `"v1"`)
}

// TestFetchResumedMismatchStartsOver checks that the mismatch made by a
// server that honours Range but not If-Range, appending its new file to the
// old one's start, is no reason to give up before fetching the whole file
// once.
func TestFetchResumedMismatchStartsOver(t *testing.T) {
	old := []byte(strings.Repeat("an older build of the artifact\n", 20000))
	s := newRangeServer(t, old)
	dir := t.TempDir()
	want := sha256Of(payload)
	const cut = 150000
	interrupt(t, s, dir, want, cut)

	s.set(func(s *rangeServer) { s.body, s.etag, s.ignoreIf = payload, `"v2"`, true })
	c := &Client{CacheDir: dir}
	reqs, _ := fetchPayload(t, c, s, want, 3)
	checkRequest(t, 1, reqs[1], cut, `"v1"`)
	checkRequest(t, 2, reqs[2], 0, "")
}

func TestFetchRangeNotUsable(t *testing.T) {
	for _, tt := range []struct {
		desc  string
		fault func(s *rangeServer)
	}{
		{desc: "416", fault: func(s *rangeServer) { s.refuseRange = true }},
		{desc: "Content-Range from 0", fault: func(s *rangeServer) { s.wrongStart = true }},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			s := newRangeServer(t, payload)
			const cut = 100000
			s.set(func(s *rangeServer) {
				s.dropAfter[0] = cut
				tt.fault(s)
			})
			c := &Client{CacheDir: t.TempDir()}
			reqs, _ := fetchPayload(t, c, s, sha256Of(payload), 3)
			checkRequest(t, 1, reqs[1], cut, `"v1"`)
			checkRequest(t, 2, reqs[2], 0, "")
		})
	}
}

// TestFetchShortRange checks that when a server answers an open range with
// less than the rest of the file, the next try asks for what is still
// missing.
func TestFetchShortRange(t *testing.T) {
	s := newRangeServer(t, payload)
	s.set(func(s *rangeServer) {
		s.dropAfter[0] = 100000
		s.rangeLimit = 200000
	})
	c := &Client{CacheDir: t.TempDir()}
	reqs, served := fetchPayload(t, c, s, sha256Of(payload), 3)
	checkRequest(t, 1, reqs[1], 100000, `"v1"`)
	checkRequest(t, 2, reqs[2], 300000, `"v1"`)
	if served != int64(len(payload)) {
		t.Errorf("server sent %d bytes for a %d-byte file", served, len(payload))
	}
}

func TestFetchBadDigestLeavesNothing(t *testing.T) {
	for _, resumed := range []bool{false, true} {
		t.Run(fmt.Sprintf("resumed=%v", resumed), func(t *testing.T) {
			s := newRangeServer(t, payload)
			if resumed {
				s.set(func(s *rangeServer) { s.dropAfter[0] = 100000 })
			}
			c := &Client{CacheDir: t.TempDir()}
			want := sha256Of([]byte("what the release page promised"))
			_, err := c.Fetch(context.Background(), s.url, want)
			var mm *MismatchError
			if !errors.As(err, &mm) || mm.Got != sha256Of(payload) {
				t.Fatalf("got %v, want a *MismatchError for the whole file", err)
			}
			if files := cacheFiles(t, c.CacheDir); len(files) != 0 {
				t.Errorf("cache holds %v after a mismatch, want nothing", files)
			}
			// Nothing is resumed from: the next Fetch starts over.
			c.Fetch(context.Background(), s.url, want)
			reqs, _ := s.got()
			checkRequest(t, len(reqs)-1, reqs[len(reqs)-1], 0, "")
		})
	}
}

// TestFetchWholePartialNeedsNoRequest checks that a whole file left as the
// partial, by a process stopped between the last byte and the rename,
// becomes the cached file without a request.
func TestFetchWholePartialNeedsNoRequest(t *testing.T) {
	s := newRangeServer(t, payload)
	c := &Client{CacheDir: t.TempDir()}
	want := sha256Of(payload)
	writePartial(t, c.CacheDir, want, payload, partMeta{URL: s.url, ETag: `"v1"`})
	p, err := c.Fetch(context.Background(), s.url, want)
	if err != nil {
		t.Fatal(err)
	}
	checkOnlyFinal(t, c, p, payload)
	if reqs, _ := s.got(); len(reqs) != 0 {
		t.Errorf("server had %d requests, want 0", len(reqs))
	}
}

func TestFetchPartialNotResumed(t *testing.T) {
	for _, tt := range []struct {
		desc string
		meta func(url string) partMeta
	}{
		// Another server's validator is no check against this one.
		{desc: "from another URL", meta: func(string) partMeta { return partMeta{URL: "http://mirror.invalid/x", ETag: `"v1"`} }},
		{desc: "without a validator", meta: func(url string) partMeta { return partMeta{URL: url} }},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			s := newRangeServer(t, payload)
			c := &Client{CacheDir: t.TempDir()}
			want := sha256Of(payload)
			writePartial(t, c.CacheDir, want, payload[:1000], tt.meta(s.url))
			reqs, _ := fetchPayload(t, c, s, want, 1)
			checkRequest(t, 0, reqs[0], 0, "")
		})
	}
}

// fetchPayload fetches s's URL with c, which must give payload and leave
// nothing in the cache except the final file after the server had n
// requests; it returns those requests and the bytes the server sent.
func fetchPayload(t *testing.T, c *Client, s *rangeServer, want Checksum, n int) ([]http.Header, int64) {
	t.Helper()
	p, err := c.Fetch(context.Background(), s.url, want)
	if err != nil {
		t.Fatal(err)
	}
	checkOnlyFinal(t, c, p, payload)
	reqs, served := s.got()
	if len(reqs) != n {
		t.Fatalf("server had %d requests, want %d", len(reqs), n)
	}
	return reqs, served
}

func writePartial(t *testing.T, cacheDir string, want Checksum, data []byte, meta partMeta) {
	t.Helper()
	dir := filepath.Join(cacheDir, want.Algo)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "."+want.Hex+".part.json"), m, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "."+want.Hex+".part"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestContentRange(t *testing.T) {
	for _, tt := range []struct {
		v                  string
		first, last, total int64
		ok                 bool
	}{
		{"bytes 100-199/200", 100, 199, 200, true},
		{"bytes 0-9/*", 0, 9, -1, true},
		{"bytes 100-199/150", 0, 0, 0, false},
		{"bytes 200-100/300", 0, 0, 0, false},
		{"bytes */200", 0, 0, 0, false},
		{"items 0-9/10", 0, 0, 0, false},
		{"bytes -1-9/10", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	} {
		first, last, total, ok := contentRange(tt.v)
		if ok != tt.ok || (ok && (first != tt.first || last != tt.last || total != tt.total)) {
			t.Errorf("contentRange(%q) = %d, %d, %d, %v; want %d, %d, %d, %v", tt.v, first, last, total, ok, tt.first, tt.last, tt.total, tt.ok)
		}
	}
}
