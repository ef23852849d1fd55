package wsl2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Distributions are shared by every Windows user's WSL; hwk touches only
// those named with its prefix and whose install directory holds its
// marker naming the cluster and node they were made for.
const (
	namePrefix = "hwk-"
	markerFile = "hwk-distribution.json"
)

// DistroName returns the name of node's WSL distribution.
func DistroName(node string) string { return namePrefix + node }

// marker is what hwk writes beside a distribution it imports: whose node
// it is, what the node is, and whether setup finished.
type marker struct {
	Cluster string      `json:"cluster"`
	Node    string      `json:"node"`
	Role    config.Role `json:"role,omitempty"`
	IP      netip.Addr  `json:"ip,omitzero"`
	// Subnet is the cluster's node network, which the host routes to
	// the node (hostroute.go).
	Subnet netip.Prefix `json:"subnet,omitzero"`
	Ready  bool         `json:"ready,omitempty"`
}

// distros manages the distributions of hwk's nodes: dir gives the install
// directory of a node's distribution (its disk, ext4.vhdx, and hwk's
// marker).
type distros struct {
	r   Runner
	dir func(drivers.Ref) string
}

// mark reads the marker in r's directory; nil when there is none or it is
// another node's.
func (d distros) mark(r drivers.Ref) *marker {
	data, err := os.ReadFile(filepath.Join(d.dir(r), markerFile))
	if err != nil {
		return nil
	}
	var m marker
	if json.Unmarshal(data, &m) != nil || m.Cluster != r.Cluster || m.Node != r.Name {
		return nil
	}
	return &m
}

// state reports whether r's distribution is registered at all, and
// whether it runs.
func (d distros) state(ctx context.Context, r drivers.Ref) (registered, running bool, err error) {
	all, err := distributions(ctx, d.r, false)
	if err != nil {
		return false, false, err
	}
	if !slices.Contains(all, DistroName(r.Name)) {
		return false, false, nil
	}
	up, err := distributions(ctx, d.r, true)
	if err != nil {
		return true, false, err
	}
	return true, slices.Contains(up, DistroName(r.Name)), nil
}

// ensure imports r's distribution from the root file system tar (plain or
// gzipped: WSL 2 unpacks it with bsdtar, which reads gzip; a WSL
// maintainer in microsoft/WSL#8503), unless hwk already made it for r:
// importing again what is there changes nothing. A distribution of the
// name that hwk did not make for r is refused. m is the rest of the marker.
func (d distros) ensure(ctx context.Context, r drivers.Ref, tar string, m marker) error {
	name := DistroName(r.Name)
	registered, _, err := d.state(ctx, r)
	if err != nil {
		return err
	}
	if registered {
		if d.mark(r) == nil {
			return &drivers.NameInUseError{Name: name, Cluster: r.Cluster, Owner: fmt.Sprintf("WSL distribution %q", name),
				Remove: "wsl.exe --unregister " + name}
		}
		return nil
	}
	dir := d.dir(r)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// The marker first: an import cut short leaves a distribution hwk
	// can tell as its own, and remove.
	m.Cluster, m.Node, m.Ready = r.Cluster, r.Name, false
	if err := writeMarker(dir, m); err != nil {
		return err
	}
	if _, err := manage(ctx, d.r, "--import", name, dir, tar, "--version", "2"); err != nil {
		return fmt.Errorf("import node %s: %w", r.Name, err)
	}
	return nil
}

func writeMarker(dir string, m marker) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return state.WriteFileAtomic(filepath.Join(dir, markerFile), data, 0o600)
}

// setReady records that r's distribution is set up as a node.
func (d distros) setReady(r drivers.Ref) error {
	m := d.mark(r)
	if m == nil {
		return fmt.Errorf("node %s: its marker is gone", r.Name)
	}
	m.Ready = true
	return writeMarker(d.dir(r), *m)
}

// stop terminates r's distribution; one that is not running, or not
// there, is left as it is.
func (d distros) stop(ctx context.Context, r drivers.Ref) error {
	_, err := manage(ctx, d.r, "--terminate", DistroName(r.Name))
	if isCode(err, "WSL_E_DISTRO_NOT_FOUND") {
		return nil
	}
	return err
}

// remove unregisters r's distribution if hwk made it for r, which deletes
// its disk, and removes its directory either way, so that a distribution
// unregistered by hand leaves nothing behind.
func (d distros) remove(ctx context.Context, r drivers.Ref) error {
	if d.mark(r) != nil {
		_, err := manage(ctx, d.r, "--unregister", DistroName(r.Name))
		if err != nil && !isCode(err, "WSL_E_DISTRO_NOT_FOUND") {
			return fmt.Errorf("delete node %s: %w", r.Name, err)
		}
	}
	if err := os.RemoveAll(d.dir(r)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete node %s's files: %w", r.Name, err)
	}
	return nil
}

// clustersDir returns the directory that holds every cluster's.
func (d *Driver) clustersDir() string {
	return state.NewStore(d.dirs).ClustersDir()
}

// nodeDir returns where a node's distribution lives: its disk and hwk's marker.
func (d *Driver) nodeDir(r drivers.Ref) string {
	return filepath.Join(state.NewStore(d.dirs).DriverDir(r.Cluster, "wsl2"), r.Name)
}

func (d *Driver) distros() distros { return distros{r: d.r, dir: d.nodeDir} }
