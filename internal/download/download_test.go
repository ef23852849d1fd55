package download

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	retryDelay = time.Millisecond
	lockPoll = 5 * time.Millisecond
	if args := os.Getenv(fetchInChild); args != "" {
		os.Exit(childFetch(args))
	}
	os.Exit(m.Run())
}

// payload is an artifact big enough to arrive in several reads.
var payload = bytes.Repeat([]byte("hwk node image artifact\n"), 20000)

func sha256Of(b []byte) Checksum {
	s := sha256.Sum256(b)
	return Checksum{Algo: "sha256", Hex: hex.EncodeToString(s[:])}
}

func sha512Of(b []byte) Checksum {
	s := sha512.Sum512(b)
	return Checksum{Algo: "sha512", Hex: hex.EncodeToString(s[:])}
}

// serve starts a server running h and returns its URL and a count of the
// requests it has had.
func serve(t *testing.T, h http.HandlerFunc) (string, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// cacheFiles lists every file, temporary or not, under dir.
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// checkOnlyFinal fails unless the cache holds just the verified file.
func checkOnlyFinal(t *testing.T, c *Client, p string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("cached file has %d bytes, not the %d expected (or other bytes)", len(got), len(want))
	}
	if files := cacheFiles(t, c.CacheDir); len(files) != 1 || files[0] != p {
		t.Errorf("cache holds %v, want only %s", files, p)
	}
}

func TestFetchThenCacheHit(t *testing.T) {
	url, requests := serve(t, func(w http.ResponseWriter, r *http.Request) { w.Write(payload) })
	c := &Client{CacheDir: t.TempDir()}
	want := sha256Of(payload)

	p, err := c.Fetch(context.Background(), url+"/containerd.tar.gz", want)
	if err != nil {
		t.Fatal(err)
	}
	if wantPath := filepath.Join(c.CacheDir, "sha256", want.Hex); p != wantPath {
		t.Errorf("path %s, want %s", p, wantPath)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Errorf("cached file has %d bytes, not the %d served", len(got), len(payload))
	}
	if fi, _ := os.Stat(p); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o644 {
		t.Errorf("cached file mode %v, want 0644", fi.Mode().Perm())
	}
	if files := cacheFiles(t, c.CacheDir); len(files) != 1 {
		t.Errorf("cache holds %v, want only the artifact", files)
	}

	// Any URL with the same digest is served from the cache, and an
	// uppercase digest names the same file.
	up := Checksum{Algo: "sha256", Hex: strings.ToUpper(want.Hex)}
	p2, err := c.Fetch(context.Background(), url+"/elsewhere", up)
	if err != nil || p2 != p {
		t.Errorf("second fetch: %s, %v; want %s", p2, err, p)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("server had %d requests, want 1", n)
	}
}

func TestFetchMismatch(t *testing.T) {
	url, requests := serve(t, func(w http.ResponseWriter, r *http.Request) { w.Write(payload) })
	c := &Client{CacheDir: t.TempDir()}
	want := sha256Of([]byte("what the release page promised"))

	_, err := c.Fetch(context.Background(), url+"/runc.amd64", want)
	var mm *MismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("got %v, want a *MismatchError", err)
	}
	if mm.URL != url+"/runc.amd64" || mm.Want != want || mm.Got != sha256Of(payload) {
		t.Errorf("got %+v", mm)
	}
	if files := cacheFiles(t, c.CacheDir); len(files) != 0 {
		t.Errorf("cache holds %v after a mismatch, want nothing", files)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("server had %d requests, want 1: a mismatch is not retried", n)
	}
}

func TestFetchStatusAndRetries(t *testing.T) {
	tests := []struct {
		desc     string
		answers  []int // status per request; 0 drops the connection
		requests int32
		wantErr  string // part of the error, or "" for success
	}{
		{desc: "404 is not retried", answers: []int{404, 200}, requests: 1, wantErr: "server answered 404 Not Found"},
		{desc: "403 is not retried", answers: []int{403, 200}, requests: 1, wantErr: "403 Forbidden"},
		{desc: "500, 500, 200 succeeds", answers: []int{500, 500, 200}, requests: 3},
		{desc: "dropped connections are retried", answers: []int{0, 0, 200}, requests: 3},
		{desc: "three 503s give up", answers: []int{503, 503, 503, 200}, requests: 3, wantErr: "503 Service Unavailable (gave up after 3 attempts)"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var mu sync.Mutex
			answers := tt.answers
			url, requests := serve(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				status := answers[0]
				answers = answers[1:]
				mu.Unlock()
				switch status {
				case 0:
					conn, _, err := w.(http.Hijacker).Hijack()
					if err == nil {
						conn.Close()
					}
				case 200:
					w.Write(payload)
				default:
					http.Error(w, "nope", status)
				}
			})
			c := &Client{CacheDir: t.TempDir()}
			_, err := c.Fetch(context.Background(), url+"/kubeadm", sha256Of(payload))
			if n := requests.Load(); n != tt.requests {
				t.Errorf("server had %d requests, want %d", n, tt.requests)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), url+"/kubeadm") {
				t.Fatalf("got %v, want an error naming the URL and containing %q", err, tt.wantErr)
			}
			if files := cacheFiles(t, c.CacheDir); len(files) != 0 {
				t.Errorf("cache holds %v after a failure", files)
			}
		})
	}
}

func TestFetchCancelMidBody(t *testing.T) {
	url, requests := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.Write(payload[:4096])
		w.(http.Flusher).Flush()
		select { // hold the body open until the client goes away
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &Client{
		CacheDir: t.TempDir(),
		Progress: func(_ string, done, _ int64) {
			if done > 0 {
				cancel()
			}
		},
	}
	start := time.Now()
	_, err := c.Fetch(ctx, url+"/big", sha256Of(payload))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v to notice the cancellation", d)
	}
	if files := cacheFiles(t, c.CacheDir); len(files) != 0 {
		t.Errorf("cache holds %v after a cancelled download", files)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("server had %d requests, want 1: a cancellation is not retried", n)
	}
}

func TestFetchRefusesBadDigestWithoutRequest(t *testing.T) {
	url, requests := serve(t, func(w http.ResponseWriter, r *http.Request) { w.Write(payload) })
	c := &Client{CacheDir: t.TempDir()}
	for _, want := range []Checksum{
		{Algo: "sha256", Hex: "../../../../etc/passwd"},
		{Algo: "sha256", Hex: hex512},
		{Algo: "md5", Hex: hexA},
	} {
		if _, err := c.Fetch(context.Background(), url, want); err == nil {
			t.Errorf("Fetch with %s succeeded", want)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("server had %d requests, want 0", n)
	}
}

func TestFetchVerified(t *testing.T) {
	sums := hexA + "  ./runc.arm64\n" + sha512Of(payload).Hex + "  ./runc.amd64\n"
	mux := http.NewServeMux()
	mux.HandleFunc("/v1.3.0/runc.amd64", func(w http.ResponseWriter, r *http.Request) { w.Write(payload) })
	mux.HandleFunc("/v1.3.0/runc.sha512sum", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(sums)) })
	mux.HandleFunc("/huge.sha512", func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("a"), maxChecksumSize+1))
	})
	url, requests := serve(t, mux.ServeHTTP)
	c := &Client{CacheDir: t.TempDir()}
	ctx := context.Background()

	p, sum, err := c.FetchVerified(ctx, url+"/v1.3.0/runc.amd64", url+"/v1.3.0/runc.sha512sum?raw=1", "runc.amd64")
	if err != nil {
		t.Fatal(err)
	}
	if sum != sha512Of(payload) {
		t.Errorf("sum %s, want %s", sum, sha512Of(payload))
	}
	if want := filepath.Join(c.CacheDir, "sha512", sum.Hex); p != want {
		t.Errorf("path %s, want %s", p, want)
	}
	if err := Verify(p, sum); err != nil {
		t.Error(err)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("server had %d requests, want 2", n)
	}

	// The checksum file is fetched every time; the artifact only once.
	if _, _, err := c.FetchVerified(ctx, url+"/v1.3.0/runc.amd64", url+"/v1.3.0/runc.sha512sum", "runc.amd64"); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 3 {
		t.Errorf("server had %d requests, want 3", n)
	}

	for _, tt := range []struct{ sumURL, name, wantErr string }{
		{url + "/v1.3.0/runc.sha512sum", "runc.riscv64", `no entry for "runc.riscv64" in runc.sha512sum (entries: ./runc.arm64, ./runc.amd64)`},
		{url + "/v1.3.0/SHA256SUMS", "runc.amd64", "cannot tell the algorithm of checksum file SHA256SUMS"},
		{url + "/v1.3.0/missing.sha256", "runc.amd64", "404 Not Found"},
		{url + "/huge.sha512", "runc.amd64", "checksum file larger than 1048576 bytes"},
	} {
		_, _, err := c.FetchVerified(ctx, url+"/v1.3.0/runc.amd64", tt.sumURL, tt.name)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("FetchVerified(%s, %s): got %v, want an error containing %q", tt.sumURL, tt.name, err, tt.wantErr)
		}
	}
}

func TestProgress(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		url, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
			if chunked { // a flush before the end means no Content-Length
				w.Write(payload[:1000])
				w.(http.Flusher).Flush()
				w.Write(payload[1000:])
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
			w.Write(payload)
		})
		type call struct{ done, total int64 }
		var calls []call
		c := &Client{
			CacheDir: t.TempDir(),
			Progress: func(u string, done, total int64) {
				if u != url+"/a" {
					t.Errorf("progress for %s", u)
				}
				calls = append(calls, call{done, total})
			},
		}
		if _, err := c.Fetch(context.Background(), url+"/a", sha256Of(payload)); err != nil {
			t.Fatal(err)
		}
		if len(calls) < 2 {
			t.Fatalf("chunked=%v: progress calls %v, want at least the first and the last", chunked, calls)
		}
		size := int64(len(payload))
		if last := calls[len(calls)-1]; last != (call{size, size}) {
			t.Errorf("chunked=%v: last progress %v, want done == total == %d", chunked, last, size)
		}
		wantTotal := size
		if chunked {
			wantTotal = -1
		}
		for i, cl := range calls[:len(calls)-1] {
			if cl.total != wantTotal || cl.done > size || (i > 0 && cl.done < calls[i-1].done) {
				t.Errorf("chunked=%v: progress calls %v: call %d is off", chunked, calls, i)
			}
		}
	}
}

func TestVerify(t *testing.T) {
	p := filepath.Join(t.TempDir(), "artifact")
	if err := os.WriteFile(p, payload, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Verify(p, sha256Of(payload)); err != nil {
		t.Errorf("good file: %v", err)
	}
	if err := Verify(p, sha512Of(payload)); err != nil {
		t.Errorf("good file, sha512: %v", err)
	}

	want := sha256Of([]byte("other"))
	err := Verify(p, want)
	var mm *MismatchError
	if !errors.As(err, &mm) || mm.URL != p || mm.Want != want || mm.Got != sha256Of(payload) {
		t.Errorf("bad file: got %v, want a *MismatchError", err)
	}
	if err := Verify(p, Checksum{Algo: "sha256", Hex: "abc"}); err == nil || errors.As(err, &mm) {
		t.Errorf("short digest: got %v, want a plain error", err)
	}
	if err := Verify(p+".missing", sha256Of(payload)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: got %v, want fs.ErrNotExist", err)
	}
}

func TestProgressIsThrottled(t *testing.T) {
	var reports int
	pw := &progressWriter{url: "u", total: 1000, report: func(string, int64, int64) { reports++ }}
	for range 1000 {
		pw.Write([]byte{0})
	}
	if reports != 1 {
		t.Errorf("1000 quick writes gave %d reports, want 1", reports)
	}
	pw.last = time.Now().Add(-progressEvery)
	pw.Write([]byte{0})
	pw.finish()
	if reports != 3 {
		t.Errorf("got %d reports, want 3", reports)
	}
}
