package imagedist

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/opencontainers/go-digest"

	"github.com/hwk-dev/hwk/internal/testing/registrytest"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// startRegistry starts a real registry process (CNCF distribution) with
// TLS from a test CA and basic auth, and points Docker's config (where
// hwk reads credentials) at the right ones.
func startRegistry(t *testing.T) (*registrytest.Registry, *Registry) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a registry process")
	}
	r := registrytest.Start(t, registrytest.Options{TLS: true, Auth: true})
	t.Setenv("DOCKER_CONFIG", r.DockerConfig(t, r.User, r.Password))
	return r, &Registry{RootCAs: r.CAPool}
}

// pushed is a test image pushed to a fresh registry, as ref.
type pushed struct {
	ti  *testImage
	r   *registrytest.Registry
	reg *Registry
	ref string
	p   *Packed
}

// pushTestImage makes a test image (with the docker format when docker is
// set), starts a registry and pushes the image's formats (all when none
// are named) to it.
func pushTestImage(t *testing.T, diskMiB int, docker bool, formats ...nodeimage.Format) *pushed {
	t.Helper()
	ti := newTestImage(t, diskMiB, docker)
	r, reg := startRegistry(t)
	x := &pushed{ti: ti, r: r, reg: reg, ref: r.Addr + "/hwk/node:v1.35.4", p: pack(t, ti, formats...)}
	dg, err := reg.Push(context.Background(), x.ref, x.p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if dg != x.p.Index.Digest {
		t.Errorf("pushed %s, packed %s", dg, x.p.Index.Digest)
	}
	return x
}

// blobGets returns the registry's blob GETs, by digest, from request from
// on.
func blobGets(t *testing.T, r *registrytest.Registry, from int) []registrytest.Request {
	t.Helper()
	var out []registrytest.Request
	for _, q := range r.Requests(t)[from:] {
		if q.Method == "GET" && strings.Contains(q.Path, "/blobs/sha256:") {
			out = append(out, q)
		}
	}
	return out
}

func digestOf(q registrytest.Request) digest.Digest {
	return digest.Digest(q.Path[strings.LastIndex(q.Path, "/")+1:])
}

// layerOf returns the packed layer of format f.
func layerOf(p *Packed, f nodeimage.Format) blob {
	for _, b := range p.blobs {
		if b.format == f {
			return b
		}
	}
	return blob{}
}

// TestPushPull checks that a pushed image pulls into an empty cache as the
// same image, byte for byte (the docker format back in the engine, which
// had lost it), that pushing again sends no blob, and that `docker pull`
// of the same reference gets the docker format as an ordinary image.
func TestPushPull(t *testing.T) {
	x := pushTestImage(t, 8, true)
	ti, r, reg, ref, dg := x.ti, x.r, x.reg, x.ref, x.p.Index.Digest
	ctx := context.Background()
	n := len(r.Requests(t))
	if _, err := reg.Push(ctx, ref, pack(t, ti), nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range r.Requests(t)[n:] {
		if q.Method == "PUT" && strings.Contains(q.Path, "/blobs/uploads/") {
			t.Errorf("a second push of the same image uploaded %s", q.Path)
		}
	}

	c, _ := ti.docker()
	tag := ti.m.Artifacts[nodeimage.FormatDocker].DockerImage
	removeImage(c, tag)
	im, err := reg.Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if im.Ref != ref+"@"+dg.String() || im.Manifest.Name != ti.m.Name {
		t.Errorf("resolved %s (%s)", im.Ref, im.Manifest.Name)
	}
	cache := t.TempDir()
	got, err := im.Unpack(ctx, UnpackOptions{CacheDir: cache, Formats: im.Formats(), Docker: ti.docker})
	if err != nil {
		t.Fatal(err)
	}
	assertSameImage(t, ti.m, cache)
	if got.Origin == nil || got.Origin.Ref != im.Ref {
		t.Errorf("origin %+v", got.Origin)
	}
	if blobs, _ := os.ReadDir(BlobsDir(cache)); len(blobs) != 0 {
		t.Errorf("a finished pull left %v", blobs)
	}

	// docker pull of the index picks the container image.
	if os.Geteuid() != 0 {
		t.Skip("docker pull needs the test CA in /etc/docker/certs.d (root)")
	}
	r.TrustInDocker(t)
	cfg := r.DockerConfig(t, r.User, r.Password)
	out, err := exec.Command("docker", "--config", cfg, "pull", ref).CombinedOutput()
	if err != nil {
		t.Fatalf("docker pull %s: %v\n%s", ref, err, out)
	}
	defer removeImage(c, ref)
	img, err := c.ImageInspect(ctx, ref)
	if err != nil || img.ID != ti.m.Artifacts[nodeimage.FormatDocker].DockerID {
		t.Errorf("docker pull gave %s (%v), want the node image %s", img.ID, err, ti.m.Artifacts[nodeimage.FormatDocker].DockerID)
	}
}

// TestPullOneFormat checks that a pull of one format fetches that layer
// and the image's small config, no other blob.
func TestPullOneFormat(t *testing.T) {
	x := pushTestImage(t, 4, false)
	r, reg, ref, p := x.r, x.reg, x.ref, x.p
	ctx := context.Background()
	n := len(r.Requests(t))
	im, err := reg.Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	got, err := im.Unpack(ctx, UnpackOptions{CacheDir: cache, Formats: []nodeimage.Format{nodeimage.FormatVHDX}})
	if err != nil {
		t.Fatal(err)
	}
	var fetched []digest.Digest
	for _, q := range blobGets(t, r, n) {
		fetched = append(fetched, digestOf(q))
	}
	slices.Sort(fetched)
	want := []digest.Digest{layerOf(p, nodeimage.FormatVHDX).desc.Digest, p.blobs[0].desc.Digest} // the layer, the config
	slices.Sort(want)
	if !slices.Equal(fetched, want) {
		t.Errorf("blobs fetched %v, want only %v", fetched, want)
	}
	if len(got.Artifacts) != 1 {
		t.Errorf("the cache lists %v", got.Artifacts)
	}
	if _, err := os.Stat(got.FilePath(nodeimage.FormatVHDX)); err != nil {
		t.Error(err)
	}
}

// TestRegistryRefusals checks that wrong or missing credentials, an
// unknown tag and a registry that is not there each fail with an error
// naming the registry and what to do.
func TestRegistryRefusals(t *testing.T) {
	r, _ := startRegistry(t)
	ctx := context.Background()
	ref := r.Addr + "/hwk/node:v1.35.4"
	for _, tc := range []struct {
		name, user, password string
		want                 []string
	}{
		{"wrong password", r.User, "not-" + r.Password, []string{"registry " + r.Addr, "refused the credentials", r.User, "docker login " + r.Addr}},
		{"no credentials", "", "", []string{"registry " + r.Addr, "needs credentials", "docker login " + r.Addr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.user == "" {
				t.Setenv("DOCKER_CONFIG", t.TempDir())
			} else {
				t.Setenv("DOCKER_CONFIG", r.DockerConfig(t, tc.user, tc.password))
			}
			_, err := (&Registry{RootCAs: r.CAPool}).Resolve(ctx, ref)
			var re *RegistryError
			if !errors.As(err, &re) {
				t.Fatalf("%T %v", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
	reg := &Registry{RootCAs: r.CAPool}
	if _, err := reg.Resolve(ctx, r.Addr+"/hwk/node:v9.9.9"); err == nil || !strings.Contains(err.Error(), "has no") {
		t.Errorf("unknown tag: %v", err)
	}
	if _, err := (&Registry{}).Resolve(ctx, ref); err == nil || !strings.Contains(err.Error(), "not trusted") {
		t.Errorf("untrusted CA: %v", err)
	}
	r.Stop()
	if _, err := reg.Resolve(ctx, ref); err == nil || !strings.Contains(err.Error(), "cannot be reached") {
		t.Errorf("registry stopped: %v", err)
	}
}

// TestCorruptBlobInRegistry checks that a layer whose bytes changed in the
// registry's storage fails its digest, and that nothing of it is kept.
func TestCorruptBlobInRegistry(t *testing.T) {
	x := pushTestImage(t, 4, false, nodeimage.FormatQCOW2)
	r, reg, ref := x.r, x.reg, x.ref
	ctx := context.Background()
	layer := layerOf(x.p, nodeimage.FormatQCOW2).desc
	flipByteAt(t, r.BlobDataPath(layer.Digest.String()), layer.Size/2)
	im, err := reg.Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	_, err = im.Unpack(ctx, UnpackOptions{CacheDir: cache, Formats: []nodeimage.Format{nodeimage.FormatQCOW2}})
	var de *DigestError
	if !errors.As(err, &de) || de.Want != layer.Digest {
		t.Fatalf("pull of a corrupt blob: %v", err)
	}
	assertNothingCached(t, cache)
}

// proxy passes TCP between hwk and the registry and can throttle it or
// cut it, counting the bytes it sends to hwk.
type proxy struct {
	ln     net.Listener
	target string

	mu sync.Mutex
	// budget is how many more bytes may reach hwk before every
	// connection is cut and new ones are refused; < 0 is no limit.
	budget int64
	// delay is a pause per 32 KiB, to slow the transfer down.
	delay time.Duration
	sent  int64
	conns []net.Conn
	// fresh are the registry-side addresses of the connections opened
	// since the last set: how the registry's log (which names each
	// request's remote address) tells them from earlier ones, whose lines
	// may come late.
	fresh map[string]bool
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, budget: -1}
	t.Cleanup(func() { ln.Close(); p.cutAll() })
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) set(budget int64, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budget, p.delay, p.sent, p.fresh = budget, delay, 0, map[string]bool{}
}

// isFresh reports whether the registry logged q for a connection opened
// since the last set.
func (p *proxy) isFresh(q registrytest.Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fresh[q.RemoteAddr]
}

func (p *proxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.budget == 0
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		if p.fresh != nil {
			p.fresh[up.LocalAddr().String()] = true
		}
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go p.down(up, c)
	}
}

// down copies registry → hwk, within the budget.
func (p *proxy) down(from, to net.Conn) {
	defer to.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if p.budget >= 0 && int64(n) > p.budget {
				n = int(p.budget)
			}
			if p.budget > 0 {
				p.budget -= int64(n)
			}
			p.sent += int64(n)
			cut, delay := p.budget == 0, p.delay
			p.mu.Unlock()
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
			if cut {
				p.cutAll()
				return
			}
			time.Sleep(delay)
		}
		if err != nil {
			return
		}
	}
}

// TestResumeAfterCut checks that when the network goes away in the middle
// of a layer, the pull tries again, keeps what it got and reports it; the
// next pull asks the registry for the rest only, and the result verifies.
func TestResumeAfterCut(t *testing.T) {
	x := pushTestImage(t, 24, false, nodeimage.FormatVDI)
	ti, r := x.ti, x.r
	ctx := context.Background()
	layer := layerOf(x.p, nodeimage.FormatVDI).desc
	px := newProxy(t, r.Addr)
	t.Setenv("DOCKER_CONFIG", r.DockerConfig(t, r.User, r.Password, px.addr()))
	reg := &Registry{RootCAs: r.CAPool} // reads the new config
	ref := px.addr() + "/hwk/node:v1.35.4"
	defer func(w time.Duration) { retryWait = w }(retryWait)
	retryWait = 10 * time.Millisecond

	im, err := reg.Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	px.set(layer.Size/2, 0) // about half the layer, then nothing
	_, err = im.Unpack(ctx, UnpackOptions{CacheDir: cache, Formats: []nodeimage.Format{nodeimage.FormatVDI}})
	if err == nil || !strings.Contains(err.Error(), "run the command again to go on from there") {
		t.Fatalf("cut pull: %v", err)
	}
	partial := filepath.Join(BlobsDir(cache), layer.Digest.Encoded()+".partial")
	st, err := os.Stat(partial)
	if err != nil || st.Size() == 0 || st.Size() >= layer.Size {
		t.Fatalf("kept %v (%v) of %d", st, err, layer.Size)
	}
	if entries, _ := os.ReadDir(nodeimage.ImagesDir(cache)); len(entries) != 0 {
		t.Errorf("a cut pull left an image: %v", entries)
	}
	have := st.Size()

	px.set(-1, 0)
	if _, err := im.Unpack(ctx, UnpackOptions{CacheDir: cache, Formats: []nodeimage.Format{nodeimage.FormatVDI}}); err != nil {
		t.Fatal(err)
	}
	sent := assertResumed(t, r, px, layer, have)
	checkFile(t, cache, ti.m, nodeimage.FormatVDI)
	t.Logf("layer %d bytes: the cut pull kept %d; the registry's log shows the second pull sent %d", layer.Size, have, sent)
}

// assertResumed checks that, on the connections px opened since its last
// set, the registry sent the layer's rest and nothing more of it.
func assertResumed(t *testing.T, r *registrytest.Registry, px *proxy, layer ocispec.Descriptor, have int64) int64 {
	t.Helper()
	var sent int64
	for _, q := range blobGets(t, r, 0) {
		if digestOf(q) == layer.Digest && px.isFresh(q) {
			sent += q.Bytes
		}
	}
	if sent != layer.Size-have {
		t.Errorf("the registry sent %d bytes of the layer; the pull had %d of %d, so %d were missing", sent, have, layer.Size, layer.Size-have)
	}
	return sent
}

func checkFile(t *testing.T, cache string, want *nodeimage.Manifest, f nodeimage.Format) {
	t.Helper()
	list, err := nodeimage.List(cache)
	if err != nil || len(list) != 1 {
		t.Fatalf("cache: %v %v", list, err)
	}
	a, _ := os.ReadFile(want.FilePath(f))
	b, err := os.ReadFile(list[0].FilePath(f))
	if err != nil || string(a) != string(b) {
		t.Errorf("%s differs after the resumed pull (%v)", f, err)
	}
}

// TestResumeAfterKill checks that when hwk is killed in the middle of a
// layer (SIGKILL, no chance to clean up), the next pull fetches only the
// rest.
func TestResumeAfterKill(t *testing.T) {
	x := pushTestImage(t, 24, false, nodeimage.FormatQCOW2)
	ti, r := x.ti, x.r
	ctx := context.Background()
	layer := layerOf(x.p, nodeimage.FormatQCOW2).desc
	px := newProxy(t, r.Addr)
	px.set(-1, 5*time.Millisecond) // about 6 MiB/s: seconds for the layer
	t.Setenv("DOCKER_CONFIG", r.DockerConfig(t, r.User, r.Password, px.addr()))
	reg := &Registry{RootCAs: r.CAPool} // reads the new config
	ref := px.addr() + "/hwk/node:v1.35.4"
	cache := t.TempDir()

	cmd := exec.Command(os.Args[0], "-test.run=^TestPullProcess$")
	cmd.Env = append(os.Environ(), "HWK_TEST_PULL_REF="+ref, "HWK_TEST_PULL_CACHE="+cache, "HWK_TEST_PULL_CA="+r.CAFile)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(BlobsDir(cache), layer.Digest.Encoded()+".partial")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if st, err := os.Stat(partial); err == nil && st.Size() > layer.Size/3 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the pull never got a third of the layer\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	st, err := os.Stat(partial)
	if err != nil || st.Size() >= layer.Size {
		t.Fatalf("after the kill: %v %v\n%s", st, err, out)
	}
	have := st.Size()

	px.set(-1, 0)
	im, err := reg.Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := im.Unpack(ctx, UnpackOptions{CacheDir: cache, Formats: []nodeimage.Format{nodeimage.FormatQCOW2}}); err != nil {
		t.Fatal(err)
	}
	sent := assertResumed(t, r, px, layer, have)
	checkFile(t, cache, ti.m, nodeimage.FormatQCOW2)
	t.Logf("layer %d bytes: the killed pull kept %d; the registry's log shows the second pull sent %d", layer.Size, have, sent)
}

// TestPullProcess runs the pull TestResumeAfterKill kills, only in that
// child process.
func TestPullProcess(t *testing.T) {
	ref := os.Getenv("HWK_TEST_PULL_REF")
	if ref == "" {
		t.Skip("run by TestResumeAfterKill")
	}
	pem, err := os.ReadFile(os.Getenv("HWK_TEST_PULL_CA"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	reg := &Registry{RootCAs: pool}
	im, err := reg.Resolve(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	_, err = im.Unpack(context.Background(), UnpackOptions{CacheDir: os.Getenv("HWK_TEST_PULL_CACHE"), Formats: im.Formats()})
	fmt.Println("pull ended:", err)
}

// TestCredentialHelper checks that credentials can come from a Docker
// credential helper (a docker-credential-NAME program, as `docker login`
// sets up with credHelpers), here a script on PATH that answers the helper
// protocol's get: the server URL on stdin, a JSON credential on stdout.
func TestCredentialHelper(t *testing.T) {
	x := pushTestImage(t, 1, false, nodeimage.FormatVDI)
	r, ref := x.r, x.ref
	ctx := context.Background()
	bin := t.TempDir()
	asked := filepath.Join(bin, "asked")
	helper := fmt.Sprintf(`#!/bin/sh
# A Docker credential helper: "get" reads a server URL, answers JSON.
[ "$1" = get ] || { echo "unexpected call: $*" >&2; exit 1; }
read server
echo "$server" > %q
[ "$server" = %q ] || { echo "credentials not found in native keychain"; exit 1; }
printf '{"ServerURL":"%%s","Username":"%%s","Secret":"%%s"}\n' "$server" %q %q
`, asked, r.Addr, r.User, r.Password)
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-hwktest"), []byte(helper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cfg := t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(fmt.Sprintf(`{"credHelpers": {%q: "hwktest"}}`, r.Addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", cfg)
	if _, err := (&Registry{RootCAs: r.CAPool}).Resolve(ctx, ref); err != nil {
		t.Fatalf("resolve with the helper's credentials: %v", err)
	}
	if got, _ := os.ReadFile(asked); strings.TrimSpace(string(got)) != r.Addr {
		t.Errorf("the helper was asked for %q", got)
	}
}

// TestDockerLayerBrokenOrCut checks that, while the docker format's layer
// streams into the engine as it downloads, the engine never keeps an image
// from a corrupt layer, and that a cut download starts its load again and
// still fetches only the rest.
func TestDockerLayerBrokenOrCut(t *testing.T) {
	x := pushTestImage(t, 1, true, nodeimage.FormatDocker)
	ctx := context.Background()
	c, _ := x.ti.docker()
	want := x.ti.m.Artifacts[nodeimage.FormatDocker]
	layer := layerOf(x.p, nodeimage.FormatDocker).desc
	if layer.Size < 4<<20 {
		t.Fatalf("the layer is only %d bytes", layer.Size)
	}
	removeImage(c, want.DockerImage)
	px := newProxy(t, x.r.Addr)
	t.Setenv("DOCKER_CONFIG", x.r.DockerConfig(t, x.r.User, x.r.Password, px.addr()))
	reg := &Registry{RootCAs: x.r.CAPool}
	defer func(w time.Duration) { retryWait = w }(retryWait)
	retryWait = 10 * time.Millisecond
	im, err := reg.Resolve(ctx, px.addr()+"/hwk/node:v1.35.4")
	if err != nil {
		t.Fatal(err)
	}
	unpack := func(cache string) error {
		_, err := im.Unpack(ctx, UnpackOptions{CacheDir: cache, Formats: []nodeimage.Format{nodeimage.FormatDocker}, Docker: x.ti.docker})
		return err
	}
	inEngine := func() bool {
		_, err := c.ImageInspect(ctx, want.DockerImage)
		return err == nil
	}

	// Cut: three tries, each a load the engine does not finish.
	cache := t.TempDir()
	px.set(layer.Size/2, 0)
	if err := unpack(cache); err == nil || !strings.Contains(err.Error(), "run the command again") {
		t.Fatalf("cut pull: %v", err)
	}
	if inEngine() {
		t.Fatal("the engine kept an image from a cut download")
	}
	st, err := os.Stat(filepath.Join(BlobsDir(cache), layer.Digest.Encoded()+".partial"))
	if err != nil {
		t.Fatal(err)
	}
	px.set(-1, 0)
	if err := unpack(cache); err != nil {
		t.Fatal(err)
	}
	assertResumed(t, x.r, px, layer, st.Size())
	if img, err := c.ImageInspect(ctx, want.DockerImage); err != nil || img.ID != want.DockerID {
		t.Errorf("after the resumed pull the engine has %s (%v), want %s", img.ID, err, want.DockerID)
	}

	// Corrupt: a digest error, and neither the engine nor the cache keeps
	// anything.
	removeImage(c, want.DockerImage)
	flipByteAt(t, x.r.BlobDataPath(layer.Digest.String()), layer.Size-100)
	cache = t.TempDir()
	var de *DigestError
	if err := unpack(cache); !errors.As(err, &de) || de.Want != layer.Digest {
		t.Fatalf("pull of a corrupt docker layer: %v", err)
	}
	if inEngine() {
		t.Error("the engine kept an image from a corrupt layer")
	}
	assertNothingCached(t, cache)
}
