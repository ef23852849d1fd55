package load

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/hwk-dev/hwk/internal/format/imagearchive"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// pushEngineImages gets from the engine, by a push to a registry hwk runs
// on 127.0.0.1 for the length of the call, only the blobs the nodes lack of
// each engine image Linux nodes hold layers of, and makes those images
// archive images; an image whose push fails stays an engine image. It
// returns what removes the received blobs.
func pushEngineImages(ctx context.Context, images []*loadImage, nodes []*loadNode, plan [][]decision) (func(), error) {
	// Why: the Docker API has no way to export part of an image, but a
	// push asks the registry about every blob first and sends only those
	// it lacks; hwk's registry answers for the nodes. It suits Docker's
	// containerd image store (engine.Multi), which pushes the compressed
	// blobs it keeps; the classic store would compress every layer first
	// to learn its digest.
	type pushImage struct {
		i       int
		targets []int // nodes that load it
	}
	var todo []pushImage
	for i, im := range images {
		if im.engine == nil || !im.engine.Multi {
			continue
		}
		var targets []int
		holds, windows := false, false
		var layers []imagearchive.Layer
		for _, d := range im.engine.DiffIDs {
			layers = append(layers, imagearchive.Layer{DiffID: d})
		}
		same := true
		for j, n := range nodes {
			if plan[i][j].outcome != Loaded {
				continue
			}
			targets = append(targets, j)
			windows = windows || n.handle.OS() == config.Windows
			same = same && plan[i][j].manifest == plan[i][targets[0]].manifest
			holds = holds || slices.Contains(imagearchive.Reused(n.inv, layers), true)
		}
		// Windows nodes take archives through a spool file anyway, a
		// node that holds nothing of the image gains nothing, and a push
		// carries one platform.
		if holds && !windows && same {
			todo = append(todo, pushImage{i: i, targets: targets})
		}
	}
	if len(todo) == 0 {
		return func() {}, nil
	}

	dir, err := os.MkdirTemp("", "hwk-push-")
	if err != nil {
		return func() {}, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	store, err := newPushStore(dir)
	if err != nil {
		return cleanup, err
	}
	handler := registry.New(registry.WithBlobHandler(store), registry.Logger(log.New(io.Discard, "", 0)))
	// Why the loopback: the engine reaches it where it shares the host's
	// network (a native Linux engine, not Docker Desktop's VM or a
	// rootless engine); elsewhere the push fails and the filtered save
	// remains.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return cleanup, err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return cleanup, err
	}

	for _, p := range todo {
		im := images[p.i]
		start := time.Now()
		repo := fmt.Sprintf("hwk-load-%s/%d", hex.EncodeToString(secret), p.i)
		var held []*loadNode
		for _, j := range p.targets {
			held = append(held, nodes[j])
		}
		store.setRepo(repo, held)
		platform := im.platforms[plan[p.i][p.targets[0]].manifest]
		target := fmt.Sprintf("%s/%s:load", ln.Addr(), repo)
		if err := im.eng.Push(ctx, im.engine.ID, target, platform); err != nil {
			if ctx.Err() != nil {
				return cleanup, ctx.Err()
			}
			continue // the filtered save still works
		}
		af, err := store.archive(handler, repo, im.refs, filepath.Join(dir, fmt.Sprintf("image-%d.tar", p.i)))
		if err != nil {
			return cleanup, fmt.Errorf("image %s as the Docker engine pushed it: %w\n  nothing was loaded", im.name, err)
		}
		if want := im.ids[plan[p.i][p.targets[0]].manifest]; len(af.scan.Images) != 1 || !slices.Contains(want, af.scan.Images[0].Manifests[0].Digest) {
			return cleanup, fmt.Errorf("image %s changed in the Docker engine while it was being loaded; load it again\n  nothing was loaded", im.name)
		}
		af.took, af.partial = time.Since(start), true
		im.archive, im.index, im.engine = af, 0, nil
		// The archive holds the one platform pushed.
		for _, j := range p.targets {
			plan[p.i][j].manifest = 0
		}
	}
	return cleanup, nil
}

// pushStore keeps the blobs a push sends in go-containerregistry's disk
// store, and tells the pushing engine which blobs it need not send: those
// every node that loads the repository's image holds.
type pushStore struct {
	disk diskStore
	dir  string
	mu   sync.Mutex
	// repos are the nodes each repository's image goes to.
	repos map[string][]*loadNode
}

// diskStore is what go-containerregistry's disk blob handler does.
type diskStore interface {
	registry.BlobHandler
	registry.BlobStatHandler
	registry.BlobPutHandler
}

func newPushStore(dir string) (*pushStore, error) {
	disk, ok := registry.NewDiskBlobHandler(dir).(diskStore)
	if !ok {
		return nil, errors.New("go-containerregistry's disk blob handler no longer stats and puts blobs")
	}
	return &pushStore{disk: disk, dir: dir, repos: map[string][]*loadNode{}}, nil
}

func (s *pushStore) setRepo(repo string, nodes []*loadNode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repo] = nodes
}

func (s *pushStore) Get(ctx context.Context, repo string, h v1.Hash) (io.ReadCloser, error) {
	return s.disk.Get(ctx, repo, h)
}

// Stat reports a blob as there when every node the image goes to holds it,
// or when the push sent it; else the disk store's own "not found".
func (s *pushStore) Stat(ctx context.Context, repo string, h v1.Hash) (int64, error) {
	s.mu.Lock()
	nodes := s.repos[repo]
	s.mu.Unlock()
	held := len(nodes) > 0
	for _, n := range nodes {
		held = held && n.inv.Blob(h.String())
	}
	if held {
		// A pusher asks only whether the blob is there.
		return 0, nil
	}
	return s.disk.Stat(ctx, repo, h)
}

// Put stores a blob; the registry checks its digest as it is read.
func (s *pushStore) Put(ctx context.Context, repo string, h v1.Hash, rc io.ReadCloser) error {
	return s.disk.Put(ctx, repo, h, rc)
}

// path returns where a blob the push sent is kept.
func (s *pushStore) path(digest string) string {
	alg, hex, _ := strings.Cut(digest, ":")
	return filepath.Join(s.dir, alg, hex)
}

// archive writes the image pushed to repo as an OCI layout tar named
// refs: the manifest, and every blob the push sent (what the nodes
// already hold is not in it), and scans it.
func (s *pushStore) archive(handler http.Handler, repo string, refs []string, path string) (*archiveFile, error) {
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v2/"+repo+"/manifests/load", nil))
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("the push left no manifest (%d %s)", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	err = imagearchive.Pack(f, rec.Header().Get("Content-Type"), rec.Body.Bytes(), refs, func(d string) (io.ReadCloser, int64, error) {
		bf, err := os.Open(s.path(d))
		if err != nil {
			return nil, 0, err // not sent: the nodes hold it
		}
		fi, err := bf.Stat()
		if err != nil {
			bf.Close()
			return nil, 0, err
		}
		return bf, fi.Size(), nil
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("the pushed image: %w", err)
	}
	return scanArchive(path)
}
