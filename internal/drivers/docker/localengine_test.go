package docker

import (
	"runtime"
	"testing"

	"github.com/moby/moby/client"
)

// TestLocalEngine checks that an engine on a Unix socket, a named pipe or
// TCP on a loopback address is this host's, so its published loopback ports
// are too and are pinned at create (they survive hwk stop and start); one on
// another host is not.
func TestLocalEngine(t *testing.T) {
	d := New()
	hosts := map[string]bool{
		"unix:///var/run/docker.sock":   true,
		"tcp://127.0.0.1:2375":          true,
		"tcp://localhost:2375":          true,
		"tcp://[::1]:2375":              true,
		"tcp://192.0.2.7:2376":          false,
		"tcp://docker.example.com:2376": false,
		"ssh://me@build-box":            false,
	}
	// The client dials named pipes only on Windows.
	if runtime.GOOS == "windows" {
		hosts["npipe:////./pipe/docker_engine"] = true
	}
	for host, want := range hosts {
		c, err := client.New(client.WithHost(host))
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if got := d.localEngine(c); got != want {
			t.Errorf("%s: local %v, want %v", host, got, want)
		}
		c.Close()
	}
}
