package registrytest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// pushBlob uploads data through the distribution API (monolithic upload)
// and returns its digest.
func pushBlob(t *testing.T, r *Registry, c *http.Client, repo string, data []byte) string {
	t.Helper()
	sum := sha256.Sum256(data)
	dg := "sha256:" + hex.EncodeToString(sum[:])
	req, _ := http.NewRequest(http.MethodPost, r.URL()+"/v2/"+repo+"/blobs/uploads/", nil)
	auth(req, r)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("start upload: %s", resp.Status)
	}
	loc := resp.Header.Get("Location")
	sep := "?"
	if strings.Contains(loc, "?") {
		sep = "&"
	}
	if !strings.HasPrefix(loc, "http") {
		loc = r.URL() + loc
	}
	req, _ = http.NewRequest(http.MethodPut, loc+sep+"digest="+dg, bytes.NewReader(data))
	auth(req, r)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("finish upload: %s", resp.Status)
	}
	return dg
}

func auth(req *http.Request, r *Registry) {
	if r.User != "" {
		req.SetBasicAuth(r.User, r.Password)
	}
}

func get(t *testing.T, r *Registry, c *http.Client, path, rangeHeader string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.URL()+path, nil)
	auth(req, r)
	if rangeHeader != "" {
		req.Header.Set("Range", rangeHeader)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestRegistryTLSAuthAndLog: the registry refuses no credentials and
// untrusting clients, serves a pushed blob whole and by range, logs what
// it served, keeps it on disk where BlobDataPath says, and serves it
// again after a restart.
func TestRegistryTLSAuthAndLog(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the registry")
	}
	r := Start(t, Options{TLS: true, Auth: true})
	c := r.HTTPClient()

	resp, err := c.Get(r.URL() + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v2/ without credentials: %s", resp.Status)
	}
	if resp, _ := get(t, r, c, "/v2/", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v2/ with credentials: %s", resp.Status)
	}
	if _, err := http.Get(r.URL() + "/v2/"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client without the test CA: %v", err)
	}

	data := bytes.Repeat([]byte("0123456789"), 1000)
	dg := pushBlob(t, r, c, "test/repo", data)
	n := len(r.Requests(t))
	resp, body := get(t, r, c, "/v2/test/repo/blobs/"+dg, "")
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) || resp.Header.Get("Accept-Ranges") != "bytes" {
		t.Errorf("whole blob: %s, %d bytes, Accept-Ranges %q", resp.Status, len(body), resp.Header.Get("Accept-Ranges"))
	}
	resp, body = get(t, r, c, "/v2/test/repo/blobs/"+dg, "bytes=10-")
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, data[10:]) {
		t.Errorf("range: %s, %d bytes", resp.Status, len(body))
	}
	reqs := r.Requests(t)[n:]
	// Each request names the client's address (the test's own
	// connection, on loopback); the rest is compared as a whole.
	for i := range reqs {
		if !strings.HasPrefix(reqs[i].RemoteAddr, "127.0.0.1:") {
			t.Errorf("request %d logged remote address %q, want 127.0.0.1:PORT", i, reqs[i].RemoteAddr)
		}
		reqs[i].RemoteAddr = ""
	}
	want := []Request{
		{Method: "GET", Path: "/v2/test/repo/blobs/" + dg, Status: 200, Bytes: int64(len(data))},
		{Method: "GET", Path: "/v2/test/repo/blobs/" + dg, Status: 206, Bytes: int64(len(data) - 10)},
	}
	if len(reqs) != 2 || reqs[0] != want[0] || reqs[1] != want[1] {
		t.Errorf("logged %+v\nwant %+v", reqs, want)
	}
	onDisk, err := os.ReadFile(r.BlobDataPath(dg))
	if err != nil || !bytes.Equal(onDisk, data) {
		t.Errorf("BlobDataPath: %v", err)
	}

	r.Stop()
	r.Stop()
	if _, err := c.Get(r.URL() + "/v2/"); err == nil {
		t.Error("the registry still answers after Stop")
	}
	r.Restart(t)
	if resp, body := get(t, r, c, "/v2/test/repo/blobs/"+dg, ""); resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Errorf("after restart: %s", resp.Status)
	}
}

// TestRegistryPlain: without TLS and auth it is a plain HTTP registry.
func TestRegistryPlain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the registry")
	}
	r := Start(t, Options{})
	if !strings.HasPrefix(r.URL(), "http://") || r.CAFile != "" || r.User != "" {
		t.Fatalf("plain registry: %s %q %q", r.URL(), r.CAFile, r.User)
	}
	c := r.HTTPClient()
	dg := pushBlob(t, r, c, "plain/repo", []byte("hello"))
	if resp, body := get(t, r, c, "/v2/plain/repo/blobs/"+dg, ""); resp.StatusCode != http.StatusOK || string(body) != "hello" {
		t.Errorf("GET: %s %q", resp.Status, body)
	}
	cfg := r.DockerConfig(t, "u", "p")
	data, err := os.ReadFile(cfg + "/config.json")
	if err != nil || !strings.Contains(string(data), r.Addr) {
		t.Errorf("docker config: %s %v", data, err)
	}
}
