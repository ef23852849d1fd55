// Package cluster is the life of a cluster: up (ordered, timed steps),
// down, and what there is to know about clusters that exist.
package cluster

import (
	"log/slog"
	"net/netip"

	"github.com/hwk-dev/hwk/internal/nodeimage/imagedist"
	"github.com/moby/moby/client"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/kubeconfig"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/ui"
)

// Provider does cluster operations with a set of drivers and a state
// store.
type Provider struct {
	Registry        *drivers.Registry
	Dirs            state.Dirs
	KubeconfigPaths kubeconfig.Paths
	// Progress shows each step; nil shows nothing.
	Progress *ui.Status
	Log      *slog.Logger
	// ImageRegistry pulls node images (nil: Docker's credentials, the
	// system's CAs); Docker connects to the engine the docker format of a
	// pulled image goes into.
	ImageRegistry *imagedist.Registry
	Docker        func() (client.APIClient, error)

	// newClient makes the API server's client in up (nil: client-go's);
	// tests give an in-memory cluster.
	newClient func(*rest.Config) (kubernetes.Interface, error)
	// hostInterface finds host interfaces over a subnet (nil: the real
	// host's); tests give a host whose networks they know.
	hostInterface func(netip.Prefix) string
	// hostMemory is the host's total and available memory (nil: the
	// real host's); tests give a host of the size they mean.
	hostMemory func() (total, available uint64, err error)
}

func (p *Provider) store() *state.Store { return state.NewStore(p.Dirs) }

// lock takes the cluster's lock. The function it returns drops it, and
// deletes the lock file and the subnet reservation when the cluster has no
// directory by then (down removed it, or up stopped before making
// anything), so that neither outlives its cluster.
func (p *Provider) lock(name string) (func(), error) {
	l, err := p.store().Lock(name)
	if err != nil {
		return nil, err
	}
	return func() {
		// A directory there that is not hwk's (made by hand, or a link)
		// is no cluster: its lock must not stay behind either.
		ok, err := p.store().Exists(name)
		if err == nil && ok && p.store().CheckOwned(name) != nil {
			l.Remove()
			return
		}
		if err == nil && !ok {
			p.store().ReleaseSubnet(name)
			l.Remove()
			return
		}
		l.Release()
	}, nil
}

func (p *Provider) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

func (p *Provider) step(name string, fn func() error) error {
	if p.Progress == nil {
		return fn()
	}
	return p.Progress.Step(name, fn)
}
