package download

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fetches of one digest on one cache, as from several hwk processes, take
// turns: one downloads, the others find its file.
func TestFetchSameDigestTakesTurns(t *testing.T) {
	var mu sync.Mutex
	requests := 0
	url, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
		w.Write(payload[:1000])
		w.(http.Flusher).Flush()
		time.Sleep(100 * time.Millisecond) // long enough for the others to queue
		w.Write(payload[1000:])
	})
	dir := t.TempDir()
	want := sha256Of(payload)
	var wg sync.WaitGroup
	paths := make([]string, 4)
	errs := make([]error, 4)
	for i := range paths {
		wg.Go(func() {
			c := &Client{CacheDir: dir}
			paths[i], errs[i] = c.Fetch(context.Background(), url+"/containerd", want)
		})
	}
	wg.Wait()
	for i := range paths {
		if errs[i] != nil {
			t.Fatalf("fetch %d: %v", i, errs[i])
		}
	}
	checkOnlyFinal(t, &Client{CacheDir: dir}, paths[0], payload)
	if requests != 1 {
		t.Errorf("server had %d requests, want 1", requests)
	}
}

func TestFetchWaitingForLockIsCancellable(t *testing.T) {
	dir := t.TempDir()
	want := sha256Of(payload)
	if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := lockDigest(context.Background(), filepath.Join(dir, "sha256", "."+want.Hex+".lock"), want)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Remove()
	url, requests := serve(t, func(w http.ResponseWriter, r *http.Request) { w.Write(payload) })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = (&Client{CacheDir: dir}).Fetch(ctx, url, want)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "in use by") {
		t.Errorf("got %v, want a deadline error saying the download is in use", err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("server had %d requests while another held the lock, want 0", n)
	}
}
