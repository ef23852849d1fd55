package debian

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/hwk-dev/hwk/internal/download"
)

// FetchOptions tune Fetch.
type FetchOptions struct {
	// Parallel is how many .debs download at once; 0 means 4, enough to
	// hide a mirror's latency without hammering it.
	Parallel int
	// Progress, if set, is told how each package's download goes (from
	// several goroutines at once); done == total when it is complete,
	// which it is told once more at the end, also for a package the cache
	// already had.
	Progress func(p LockedPackage, done, total int64)
}

// Fetch downloads every package of the lock from its mirror into c's
// cache, each checked against the lock's SHA-256, and returns the local
// paths in lock order. A package already in the cache (by digest) costs no
// request. It stops at the first failure.
func Fetch(ctx context.Context, c *download.Client, l *Lock, o FetchOptions) ([]string, error) {
	if l.Mirror == "" {
		return nil, errors.New("the lock names no mirror: relock, or set the mirror to fetch from")
	}
	n := o.Parallel
	if n <= 0 {
		n = 4
	}
	// The client's own Progress is per URL; ours is per package, so each
	// download gets a copy of the client with its own hook.
	paths := make([]string, len(l.Packages))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, n)
	)
	for i, p := range l.Packages {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			path, err := fetchOne(ctx, *c, l.Mirror, p, o.Progress)
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel(err)
				return
			}
			paths[i] = path
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		// The first failure is the cause; the others are mostly
		// cancellations it caused.
		return nil, errs[0]
	}
	return paths, nil
}

func fetchOne(ctx context.Context, c download.Client, mirror string, p LockedPackage, progress func(LockedPackage, int64, int64)) (string, error) {
	if p.Filename == "" || !isSHA256(p.SHA256) {
		return "", fmt.Errorf("package %s %s: the lock has no file name or SHA-256 for it: relock", p.Name, p.Version)
	}
	if progress != nil {
		c.Progress = func(_ string, done, total int64) { progress(p, done, total) }
	}
	u := strings.TrimRight(mirror, "/") + "/" + strings.TrimLeft(p.Filename, "/")
	path, err := c.Fetch(ctx, u, download.Checksum{Algo: "sha256", Hex: p.SHA256})
	var mismatch *download.MismatchError
	var status *download.StatusError
	switch {
	case err == nil:
		// Also for a package the cache had, which moved no bytes.
		if progress != nil {
			progress(p, p.Size, p.Size)
		}
		return path, nil
	case errors.As(err, &mismatch):
		return "", fmt.Errorf("package %s %s from %s: SHA-256 is %s, the lock says %s: the mirror serves other bytes under the locked name (a broken or tampered mirror, or a proxy rewriting it); use another mirror, or relock if the archive really changed it", p.Name, p.Version, u, mismatch.Got.Hex, strings.ToLower(p.SHA256))
	case errors.As(err, &status) && (status.Code == http.StatusNotFound || status.Code == http.StatusGone):
		return "", fmt.Errorf("package %s %s: %s is gone from the mirror (%s): the archive has dropped the locked version; relock to take the current one, or use a mirror that keeps it (such as snapshot.debian.org)", p.Name, p.Version, u, status.Status)
	default:
		return "", fmt.Errorf("package %s %s: %w", p.Name, p.Version, err)
	}
}
