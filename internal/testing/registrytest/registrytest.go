// Package registrytest runs a real OCI registry for tests: the registry
// program of CNCF distribution (github.com/distribution/distribution/v3,
// pinned by hack/registry/go.mod), built from the Go module proxy and
// started as a process on 127.0.0.1, with TLS from a throwaway CA and
// htpasswd basic auth. Tests read what it served from its log.
package registrytest

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Options for Start.
type Options struct {
	// TLS serves HTTPS with a certificate for 127.0.0.1 signed by a fresh
	// test CA.
	TLS bool
	// Auth requires HTTP basic auth (htpasswd, bcrypt).
	Auth bool
}

// Registry is one running registry process.
type Registry struct {
	// Addr is "127.0.0.1:PORT".
	Addr string
	// CAFile is the test CA's PEM ("" without TLS), and CAPool the same
	// CA for clients in the test process.
	CAFile string
	CAPool *x509.CertPool
	// User and Password are the credentials, with Auth.
	User, Password string
	// StorageDir is the registry's filesystem storage.
	StorageDir string
	// LogFile gets the process's output: one JSON entry per line.
	LogFile string

	bin    string
	config string
	tls    bool
	cmd    *exec.Cmd
	mu     sync.Mutex
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary builds the registry program from hack/registry and returns its
// path. When it cannot be built (no Go module proxy, say) the test skips,
// unless HWK_REQUIRE_REGISTRY=1, where it fails.
//
// The program lives in the user's cache directory under a name keyed by
// what it is built from (hack/registry's go.mod and go.sum, and the Go
// version), so that it is built once, not once per test process; it
// is put there by a rename, so that test processes running at once each
// get a whole file, and no run leaves a 70 MB copy behind in the
// temporary directory.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { buildPath, buildErr = build() })
	if buildErr != nil {
		if os.Getenv("HWK_REQUIRE_REGISTRY") == "1" {
			t.Fatal(buildErr)
		}
		t.Skipf("the registry program did not build: %v", buildErr)
	}
	return buildPath
}

func build() (string, error) {
	_, self, _, _ := runtime.Caller(0)
	mod := filepath.Join(filepath.Dir(self), "..", "..", "..", "hack", "registry")
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "hwk-test")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	key := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(mod, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(key, "%s %d\n", f, len(data))
		key.Write(data)
	}
	fmt.Fprintf(key, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	path := filepath.Join(dir, "registry-"+hex.EncodeToString(key.Sum(nil))[:16])
	// Windows runs a program by its extension and has no mode bits.
	executable := func(m os.FileMode) bool { return m&0o100 != 0 }
	if runtime.GOOS == "windows" {
		path += ".exe"
		executable = func(os.FileMode) bool { return true }
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && executable(fi.Mode()) {
		return path, nil
	}
	tmp, err := os.CreateTemp(dir, "registry-*.tmp")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	cmd := exec.Command("go", "build", "-o", tmp.Name(), "github.com/distribution/distribution/v3/cmd/registry")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the registry in %s: %v\n%s", mod, err, out)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	// Builds from other sources are stale now (one is 70 MB); the old
	// unkeyed name too.
	old, _ := filepath.Glob(filepath.Join(dir, "registry-*"))
	for _, o := range append(old, filepath.Join(dir, "registry")) {
		if o != path && !strings.HasSuffix(o, ".tmp") {
			os.Remove(o)
		}
	}
	return path, nil
}

// Start starts a registry with opts and waits until it answers; it stops
// when the test ends.
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	r := &Registry{bin: bin, StorageDir: filepath.Join(dir, "storage"), LogFile: filepath.Join(dir, "registry.log"), tls: opts.TLS}
	if opts.TLS {
		r.makeCerts(t, dir)
	}
	var htpasswd string
	if opts.Auth {
		r.User, r.Password = "hwk-test", randomHex(12)
		hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		htpasswd = filepath.Join(dir, "htpasswd")
		must(t, os.WriteFile(htpasswd, []byte(r.User+":"+string(hash)+"\n"), 0o600))
	}
	var last error
	for try := 0; try < 5; try++ {
		r.Addr = freeAddr(t)
		r.config = filepath.Join(dir, "config.yml")
		must(t, os.WriteFile(r.config, []byte(r.configYAML(dir, htpasswd)), 0o600))
		if last = r.start(); last == nil {
			t.Cleanup(r.Stop)
			return r
		}
	}
	t.Fatalf("the registry did not start: %v\n%s", last, r.tail())
	return nil
}

func (r *Registry) configYAML(dir, htpasswd string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `version: 0.1
log:
  level: info
  formatter: json
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  secret: %s
`, r.StorageDir, r.Addr, randomHex(16))
	if r.tls {
		fmt.Fprintf(&b, "  tls:\n    certificate: %s\n    key: %s\n", filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"))
	}
	if htpasswd != "" {
		fmt.Fprintf(&b, "auth:\n  htpasswd:\n    realm: hwk-test\n    path: %s\n", htpasswd)
	}
	return b.String()
}

// start runs the process and waits for /v2/ to answer.
func (r *Registry) start() error {
	log, err := os.OpenFile(r.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.bin, "serve", r.config)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); log.Close() }()
	client := r.HTTPClient()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("registry exited: %v", err)
		default:
		}
		resp, err := client.Get(r.URL() + "/v2/")
		if err == nil {
			resp.Body.Close()
			r.mu.Lock()
			r.cmd = cmd
			r.mu.Unlock()
			go func() { <-exited }()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Kill()
	return fmt.Errorf("registry did not answer on %s", r.Addr)
}

// Stop kills the registry; it is safe to call more than once.
func (r *Registry) Stop() {
	r.mu.Lock()
	cmd := r.cmd
	r.cmd = nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	// Wait until the port is free, so a restart can have it.
	for i := 0; i < 100; i++ {
		c, err := net.DialTimeout("tcp", r.Addr, 100*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(20 * time.Millisecond)
	}
}

// Restart starts a stopped registry again: the same address, storage,
// credentials and log.
func (r *Registry) Restart(t testing.TB) {
	t.Helper()
	r.Stop()
	if err := r.start(); err != nil {
		t.Fatalf("restart the registry: %v\n%s", err, r.tail())
	}
}

// URL is the registry's base URL.
func (r *Registry) URL() string {
	if r.tls {
		return "https://" + r.Addr
	}
	return "http://" + r.Addr
}

// HTTPClient trusts the test CA, for tests that talk to the registry
// directly.
func (r *Registry) HTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: r.CAPool}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// Request is one request the registry served, from its log.
type Request struct {
	Method string
	// Path is the request URI, e.g. /v2/hwk/node/blobs/sha256:abc...
	Path   string
	Status int
	// Bytes is what the registry wrote of the response body (short of the
	// whole when the client went away).
	Bytes int64
	// RemoteAddr is the client's address and port: which connection the
	// request came on.
	RemoteAddr string
}

// logEntry is the part of distribution's JSON log line for a request that
// ended ("response completed", with or without error).
type logEntry struct {
	Msg     string `json:"msg"`
	Method  string `json:"http.request.method"`
	URI     string `json:"http.request.uri"`
	Status  int    `json:"http.response.status"`
	Written int64  `json:"http.response.written"`
	Remote  string `json:"http.request.remoteaddr"`
}

// Requests lists every request logged so far, in order.
func (r *Registry) Requests(t testing.TB) []Request {
	t.Helper()
	f, err := os.Open(r.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Request
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e logEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil || !strings.HasPrefix(e.Msg, "response completed") {
			continue
		}
		out = append(out, Request{Method: e.Method, Path: e.URI, Status: e.Status, Bytes: e.Written, RemoteAddr: e.Remote})
	}
	return out
}

// BlobDataPath is where the filesystem driver keeps a blob's bytes, for a
// test to corrupt.
func (r *Registry) BlobDataPath(digest string) string {
	hexPart := strings.TrimPrefix(digest, "sha256:")
	return filepath.Join(r.StorageDir, "docker", "registry", "v2", "blobs", "sha256", hexPart[:2], hexPart, "data")
}

// DockerConfig writes a Docker client config directory whose config.json
// logs in to the registry as user with password, and returns it (for
// DOCKER_CONFIG or docker --config). The same login goes to each of
// alsoAt (a proxy in front of the registry, say).
func (r *Registry) DockerConfig(t testing.TB, user, password string, alsoAt ...string) string {
	t.Helper()
	dir := t.TempDir()
	auths := map[string]any{}
	for _, host := range append([]string{r.Addr}, alsoAt...) {
		auths[host] = map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}
	}
	cfg := map[string]any{"auths": auths}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(dir, "config.json"), data, 0o600))
	return dir
}

// TrustInDocker puts the test CA where a local Docker engine looks for a
// registry's CA (/etc/docker/certs.d/ADDR/ca.crt, read at each pull) and
// removes it when the test ends. It needs root.
func (r *Registry) TrustInDocker(t testing.TB) {
	t.Helper()
	if r.CAFile == "" {
		t.Fatal("the registry has no TLS")
	}
	dir := filepath.Join("/etc/docker/certs.d", r.Addr)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("trust the test CA in Docker (needs root): %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data, err := os.ReadFile(r.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(dir, "ca.crt"), data, 0o644))
}

// makeCerts makes the CA and the server's certificate for 127.0.0.1.
func (r *Registry) makeCerts(t testing.TB, dir string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hwk test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	must(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	must(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	srv := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &key.PublicKey, caKey)
	must(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	r.CAFile = filepath.Join(dir, "ca.pem")
	must(t, os.WriteFile(r.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "server.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "server-key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	r.CAPool = x509.NewCertPool()
	r.CAPool.AddCert(caCert)
}

// tail is the end of the registry's log, for failures.
func (r *Registry) tail() string {
	data, _ := os.ReadFile(r.LogFile)
	if lines := bytes.Split(data, []byte("\n")); len(lines) > 20 {
		data = bytes.Join(lines[len(lines)-20:], []byte("\n"))
	}
	return string(data)
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func must(t testing.TB, err error) {
	if err != nil {
		t.Helper()
		t.Fatal(err)
	}
}
