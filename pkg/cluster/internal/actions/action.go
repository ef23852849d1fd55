// Package actions holds the steps of `hwk up`, one small type per step,
// run in order by pkg/cluster. Each step does one job, names itself, and
// on failure returns an error that explains itself (the end of
// the log that matters, from the node).
package actions

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/internal/nodeimage/imagedist"
	"github.com/hwk-dev/hwk/internal/ui"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/internal/kubeconfig"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster/internal/clusterdir"
	"github.com/hwk-dev/hwk/pkg/node"
)

// Action is one step of `hwk up`.
type Action interface {
	// Name is the step as the user sees it ("Creating nodes").
	Name() string
	Execute(ctx context.Context, c *Context) error
}

// Skipper is an action that has nothing to do for some clusters, and then
// shows no step at all.
type Skipper interface {
	Skip(c *Context) bool
}

// Describer is an action whose step line names what it works on, which it
// knows only once the steps before it have run.
type Describer interface {
	Describe(c *Context) string
}

// Context is what the steps share. The fields at the top are set before
// the first step; the ones below are filled in as steps run.
type Context struct {
	Config   *config.Cluster
	Registry *drivers.Registry
	Store    *state.Store
	// CacheDir is where node images are cached.
	CacheDir   string
	Kubeconfig kubeconfig.Paths
	// SetCurrentContext makes the new cluster kubectl's current context.
	SetCurrentContext bool
	Log               *slog.Logger
	// Started is when `up` began; the waits report times from it.
	Started time.Time
	// Timeouts for the waits.
	Timeouts Timeouts
	// Pull is when node images are pulled; ImageRegistry pulls them
	// (nil: Docker's credentials and the system's CAs) and Docker is the
	// engine the docker format goes into.
	Pull          PullPolicy
	ImageRegistry *imagedist.Registry
	Docker        func() (client.APIClient, error)
	// Status shows the running step, for steps that show progress on it;
	// nil shows nothing.
	Status *ui.Status
	// NewClient makes the client of the API server once kubeadm init is
	// done; nil is client-go's (kubernetes.NewForConfig).
	NewClient func(*rest.Config) (kubernetes.Interface, error)
	// HostInterface describes a host interface with an address in a
	// subnet, or ""; nil is drivers.OverlappingInterface (tests give a
	// host of their own).
	HostInterface func(netip.Prefix) string
	// HostMemory is the host's total and available memory; nil is
	// hostmem.Read (tests give a host of their own).
	HostMemory func() (total, available uint64, err error)

	// Dir is the cluster's directory (set by the record Network writes
	// first).
	Dir string
	// Drivers maps each node to its driver.
	Drivers map[string]drivers.Driver
	// Images maps each node to its image in its driver's terms.
	Images map[string]string
	// pulls are the images Preflight found missing, for PullImages.
	pulls []*pull
	// locales are the Windows nodes' images' languages (noteImage).
	locales map[string]string
	// Boot is the cluster as bootstrap sees it.
	Boot bootstrap.Cluster
	// CACertHash pins the cluster CA for joins (after kubeadm init).
	CACertHash string
	// Client talks to the API server from the host (after kubeadm init).
	Client kubernetes.Interface
	// HostKubeconfig is admin.conf with the host's endpoint in it.
	HostKubeconfig *clientcmdapi.Config

	// APIReady and NodesReady are how long after Started the API server
	// answered and every node was Ready.
	APIReady, NodesReady time.Duration

	mu      sync.Mutex
	handles map[string]*node.Node
}

// Timeouts bound each wait of `up`.
type Timeouts struct {
	// NodeBoot bounds a Linux node's boot, WindowsBoot a Windows node's
	// first boot (see waitWindowsBooted), which does far more.
	NodeBoot    time.Duration
	WindowsBoot time.Duration
	APIServer   time.Duration
	NodesReady  time.Duration
	Pods        time.Duration
}

// EmulationSlowdown is how many times longer up waits when a driver
// emulates the CPU (see Preflight for why 4).
const EmulationSlowdown = 4

// Scale makes every timeout n times longer.
func (t Timeouts) Scale(n int) Timeouts {
	d := time.Duration(n)
	return Timeouts{NodeBoot: t.NodeBoot * d, WindowsBoot: t.WindowsBoot * d, APIServer: t.APIServer * d, NodesReady: t.NodesReady * d, Pods: t.Pods * d}
}

// DefaultTimeouts suit a laptop or a small CI runner: generous, since a
// timeout that fires on a slow but healthy machine is worse than a slow
// failure. A Windows node's first boot gets 20 minutes (see waitWindowsBooted).
var DefaultTimeouts = Timeouts{
	NodeBoot:    5 * time.Minute,
	WindowsBoot: 20 * time.Minute,
	APIServer:   4 * time.Minute,
	NodesReady:  6 * time.Minute,
	Pods:        6 * time.Minute,
}

// Node returns a handle on the named node, made once and kept.
func (c *Context) Node(ctx context.Context, name string) (*node.Node, error) {
	c.mu.Lock()
	h := c.handles[name]
	c.mu.Unlock()
	if h != nil {
		return h, nil
	}
	d, ok := c.Drivers[name]
	if !ok {
		return nil, fmt.Errorf("node %s is not part of cluster %s", name, c.Config.Name)
	}
	h, err := d.Node(ctx, drivers.Ref{Cluster: c.Config.Name, Name: name})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.handles == nil {
		c.handles = map[string]*node.Node{}
	}
	c.handles[name] = h
	c.mu.Unlock()
	return h, nil
}

// LogPath returns where a step keeps the full output of a command it ran.
func (c *Context) LogPath(name string) string {
	return filepath.Join(c.Dir, clusterdir.LogsDir, name+".log")
}

// ControlPlane returns the control-plane node of the config.
func (c *Context) ControlPlane() config.Node {
	for _, n := range c.Config.Nodes {
		if n.Role == config.ControlPlane {
			return n
		}
	}
	return config.Node{}
}

// Workers returns the config's worker nodes of os ("" for all).
func (c *Context) Workers(os config.OS) []config.Node {
	var out []config.Node
	for _, n := range c.Config.Nodes {
		if n.Role == config.Worker && (os == "" || n.OS == os) {
			out = append(out, n)
		}
	}
	return out
}

// parallel runs fn for every node at once and joins their errors.
func parallel(nodes []config.Node, fn func(config.Node) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(n)
		}()
	}
	wg.Wait()
	return joinErrors(errs)
}

// retry calls fn every interval until it succeeds or timeout passes, and
// then returns fn's last error (or ctx's, when up was cancelled).
func retry(ctx context.Context, timeout, interval time.Duration, fn func(context.Context) error) error {
	ctx2, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := fn(ctx2)
		if err == nil {
			return nil
		}
		select {
		case <-ctx2.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		case <-time.After(interval):
		}
	}
}
