package doctor

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/moby/moby/client"
)

// HostProbes are the probes of this host.
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

// parentDir is path's parent; the root is its own parent.
func parentDir(path string) string { return filepath.Dir(path) }
