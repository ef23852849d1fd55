package doctor

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/internal/ui"
)

// HostProbes returns the probes of this host.
func HostProbes() Probes {
	p := Probes{
		Engine:    dockerEngine,
		Listening: listening,
		Now:       time.Now,
	}
	platform(&p)
	return p
}

func dockerEngine(ctx context.Context) (*Engine, error) {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return nil, err
	}
	res, err := c.Info(ctx, client.InfoOptions{})
	if err != nil {
		return nil, err
	}
	t, err := time.Parse(time.RFC3339Nano, res.Info.SystemTime)
	if err != nil {
		return nil, fmt.Errorf("the engine's time %q: %w", res.Info.SystemTime, err)
	}
	return &Engine{Version: res.Info.ServerVersion, OSType: res.Info.OSType, Time: t}, nil
}

func listening(port int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// parentDir returns path's parent; the root is its own parent.
func parentDir(path string) string { return filepath.Dir(path) }

// timed returns p with each probe that may wait (on PowerShell, the
// engine, a network drive) held to probeLimit, named for the notes and the
// error.
func (p Probes) timed() Probes {
	q := p
	if p.Virtualization != nil {
		q.Virtualization = func(ctx context.Context) (Virtualization, error) {
			return within(ctx, "the host's virtualization facts", p.Virtualization)
		}
	}
	if p.Memory != nil {
		q.Memory = func(ctx context.Context) (uint64, uint64, error) {
			m, err := within(ctx, "the host's memory figures", func(ctx context.Context) ([2]uint64, error) {
				total, avail, err := p.Memory(ctx)
				return [2]uint64{total, avail}, err
			})
			return m[0], m[1], err
		}
	}
	if p.Engine != nil {
		q.Engine = func(ctx context.Context) (*Engine, error) {
			return within(ctx, "the Docker engine", p.Engine)
		}
	}
	if p.DiskFree != nil {
		q.DiskFree = func(path string) (uint64, error) {
			return within(context.Background(), "the free space under "+path, func(context.Context) (uint64, error) { return p.DiskFree(path) })
		}
	}
	return q
}

// within runs probe with a time limit and notes while it is slow.
func within[T any](ctx context.Context, what string, probe func(context.Context) (T, error)) (T, error) {
	w := ui.NewWait(what)
	stop := ui.Watch(ctx, probeLimit, w)
	defer stop()
	start := time.Now()
	v, late, err := ui.Within(ctx, w, probeLimit, probe)
	if late {
		return v, fmt.Errorf("no answer from %s in %s", what, time.Since(start).Round(100*time.Millisecond))
	}
	return v, err
}
