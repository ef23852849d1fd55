package download

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFetchSameDigestTakesTurns checks that fetches of one digest on one
// cache, as from several hwk processes, take turns: one downloads, the
// others find its file.
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

// fetchInChild is the environment variable that, set to "URL CACHEDIR
// ALGO:HEX", makes the test binary a process that runs one Fetch
// (childFetch), as another hwk would.
const fetchInChild = "HWK_DOWNLOAD_TEST_FETCH"

func childFetch(args string) int {
	var url, dir, sum string
	if _, err := fmt.Sscan(args, &url, &dir, &sum); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	algo, hex, _ := strings.Cut(sum, ":")
	if _, err := (&Client{CacheDir: dir}).Fetch(context.Background(), url, Checksum{Algo: algo, Hex: hex}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestFetchAfterAnotherProcessIsKilled checks that another process
// downloading the digest keeps this one waiting; when it is killed
// mid-download, the operating system drops its lock, and this one goes on
// from the bytes it left.
func TestFetchAfterAnotherProcessIsKilled(t *testing.T) {
	s := newRangeServer(t, payload)
	const cut = 200000
	s.set(func(s *rangeServer) { s.holdAfter[0] = cut })
	dir := t.TempDir()
	want := sha256Of(payload)

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), fetchInChild+"="+s.url+" "+dir+" "+want.String())
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	defer child.Process.Kill()
	part := filepath.Join(dir, want.Algo, "."+want.Hex+".part")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if fi, err := os.Stat(part); err == nil && fi.Size() >= cut {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other process never wrote %d bytes to %s", cut, part)
		}
	}

	type result struct {
		path string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		p, err := (&Client{CacheDir: dir}).Fetch(context.Background(), s.url, want)
		done <- result{p, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("Fetch returned (%s, %v) while another process held the download", r.path, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if reqs, _ := s.got(); len(reqs) != 1 {
		t.Fatalf("server had %d requests while the other process downloaded, want 1", len(reqs))
	}

	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err == nil {
		t.Fatal("the other process finished before it was killed")
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Fetch still waiting 20s after the other process was killed")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkOnlyFinal(t, &Client{CacheDir: dir}, r.path, payload)
	reqs, served := s.got()
	if len(reqs) != 2 {
		t.Fatalf("server had %d requests, want 2", len(reqs))
	}
	checkRequest(t, 1, reqs[1], cut, `"v1"`)
	if served != int64(len(payload)) {
		t.Errorf("server sent %d bytes for a %d-byte file", served, len(payload))
	}
}
