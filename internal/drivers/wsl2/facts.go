package wsl2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// gatherFacts learns what judgeHost and judgeNode need: WSL's and
// Windows' versions from wsl.exe, .wslconfig from the user's profile, and
// the hwk node distributions there are (by their markers under clusters).
func gatherFacts(ctx context.Context, r Runner, profile, clusters string) (hostFacts, error) {
	var f hostFacts
	if err := versions(ctx, r, &f); err != nil {
		return f, err
	}
	if f.inbox {
		return f, nil
	}
	data, err := os.ReadFile(filepath.Join(profile, ".wslconfig"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return f, fmt.Errorf("read .wslconfig: %w", err)
	}
	f.config = parseWSLConfig(string(data))
	names, err := distributions(ctx, r, false)
	if err != nil {
		return f, err
	}
	f.nodes = map[string]string{}
	for _, n := range names {
		node, ok := strings.CutPrefix(n, namePrefix)
		if !ok {
			continue
		}
		// A hwk- distribution is a node of the cluster whose directory
		// holds its marker.
		matches, _ := filepath.Glob(filepath.Join(clusters, "*", "wsl2", node, markerFile))
		for _, m := range matches {
			raw, err := os.ReadFile(m)
			var mk marker
			if err == nil && json.Unmarshal(raw, &mk) == nil && mk.Node == node {
				f.nodes[mk.Cluster] = n
			}
		}
	}
	return f, nil
}

// portTaken reports whether something listens on port on the host's
// loopback or on all its addresses: WSL would not forward the port to the
// node then.
func portTaken(port uint16) bool {
	for _, addr := range []string{"127.0.0.1", "0.0.0.0"} {
		l, err := net.Listen("tcp4", net.JoinHostPort(addr, fmt.Sprint(port)))
		if err != nil {
			return true
		}
		l.Close()
	}
	return false
}
