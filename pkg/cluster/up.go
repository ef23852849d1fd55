package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/kubeconfig"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster/internal/actions"
)

// Timeouts bound the waits of Up and Start.
type Timeouts struct {
	// NodeBoot bounds a Linux node's boot, WindowsBoot a Windows node's
	// first boot, which runs Windows Setup's specialize pass.
	NodeBoot    time.Duration
	WindowsBoot time.Duration
	APIServer   time.Duration
	NodesReady  time.Duration
	Pods        time.Duration
}

// DefaultTimeouts are the waits' bounds where Timeouts leaves them zero.
var DefaultTimeouts = Timeouts(actions.DefaultTimeouts)

// WindowsImageHelp tells what a Windows worker needs, for messages.
const WindowsImageHelp = actions.WindowsImageHelp

// PullPolicy is when Up pulls node images.
type PullPolicy string

// The pull policies, as kind and Kubernetes name them.
const (
	// PullMissing pulls an image only when the cache has none that fits.
	PullMissing PullPolicy = "missing"
	// PullAlways asks the registry every time.
	PullAlways PullPolicy = "always"
	// PullNever uses the cache only.
	PullNever PullPolicy = "never"
)

// PullPolicies lists the pull policies, for flags.
var PullPolicies = []PullPolicy{PullMissing, PullAlways, PullNever}

// UpOptions tune Up.
type UpOptions struct {
	// SetCurrentContext makes the cluster kubectl's current context.
	SetCurrentContext bool
	// Timeouts bound the waits; zero fields take the defaults.
	Timeouts Timeouts
	// Pull is when node images are pulled ("" is PullMissing).
	Pull PullPolicy
	// Recreate deletes the cluster first (as Down does) when anything of
	// it exists: a half-made one, leftovers, or a working one.
	Recreate bool
}

// UpResult is what Up made, and how long it took.
type UpResult struct {
	Context string
	// Subnet is the node network's subnet, chosen by up when the config
	// named none (AutoSubnet).
	Subnet     string
	AutoSubnet bool
	// APIReady and NodesReady are the times from the start of Up until
	// the API server answered and until every node was Ready.
	APIReady, NodesReady, Total time.Duration
}

// steps returns the actions of up, in order.
func steps() []actions.Action {
	return []actions.Action{
		actions.Preflight{},
		actions.PullImages{},
		actions.Network{},
		actions.Nodes{},
		actions.KubeadmInit{},
		actions.Calico{},
		actions.WindowsComponents{},
		actions.JoinWorkers{},
		actions.LabelNodes{},
		actions.WaitNetwork{},
		actions.CoreDNS{},
		actions.WaitReady{},
		actions.Kubeconfig{},
	}
}

// Up makes the cluster cfg (validated) describes. It holds the cluster's
// lock throughout. When a step fails the cluster is left as it is, for
// inspection, and the error (a *StepError) tells how to remove it.
func (p *Provider) Up(ctx context.Context, cfg *config.Cluster, opts UpOptions) (*UpResult, error) {
	if opts.Recreate {
		name := fmt.Sprintf("Deleting what there is of cluster %q", cfg.Name)
		if err := p.step(name, func() error {
			_, err := p.Down(ctx, cfg.Name)
			return err
		}); err != nil {
			return nil, &StepError{Step: name, Cluster: cfg.Name, Err: err, Interrupted: ctx.Err() != nil}
		}
	}
	unlock, err := p.lock(cfg.Name)
	if err != nil {
		return nil, err
	}
	defer unlock()

	c := &actions.Context{
		Config:            cfg,
		Registry:          p.Registry,
		Store:             p.store(),
		CacheDir:          p.Dirs.Cache,
		Kubeconfig:        p.KubeconfigPaths,
		SetCurrentContext: opts.SetCurrentContext,
		Log:               p.log(),
		Started:           time.Now(),
		Timeouts:          actions.Timeouts(withDefaults(opts.Timeouts)),
		Pull:              actions.PullPolicy(opts.Pull),
		ImageRegistry:     p.ImageRegistry,
		Docker:            p.Docker,
		Status:            p.Progress,
		NewClient:         p.newClient,
		HostInterface:     p.hostInterface,
		HostMemory:        p.hostMemory,
	}
	if c.Pull == "" {
		c.Pull = actions.PullMissing
	}
	for _, a := range steps() {
		if s, ok := a.(actions.Skipper); ok && s.Skip(c) {
			continue
		}
		name := a.Name()
		if d, ok := a.(actions.Describer); ok {
			name = d.Describe(c)
		}
		var failed *StepError
		// The step line shows what went wrong; the error returned names
		// which step, for callers that print no step lines.
		_ = p.step(name, func() error {
			if err := a.Execute(ctx, c); err != nil {
				// Nothing of the cluster exists until its record does.
				failed = &StepError{Step: name, Cluster: cfg.Name, Err: err, Made: c.Dir != "", Interrupted: ctx.Err() != nil}
				return detailError{failed}
			}
			return nil
		})
		if failed != nil {
			return nil, failed
		}
	}
	return &UpResult{
		Context:    kubeconfig.ContextName(cfg.Name),
		Subnet:     cfg.Networking.NodeSubnet,
		AutoSubnet: cfg.AutoNodeSubnet(),
		APIReady:   c.APIReady,
		NodesReady: c.NodesReady,
		Total:      time.Since(c.Started),
	}, nil
}

func withDefaults(t Timeouts) Timeouts {
	d := DefaultTimeouts
	if t.NodeBoot == 0 {
		t.NodeBoot = d.NodeBoot
	}
	if t.WindowsBoot == 0 {
		t.WindowsBoot = d.WindowsBoot
	}
	if t.APIServer == 0 {
		t.APIServer = d.APIServer
	}
	if t.NodesReady == 0 {
		t.NodesReady = d.NodesReady
	}
	if t.Pods == 0 {
		t.Pods = d.Pods
	}
	return t
}

// StepError is a failed step of up.
type StepError struct {
	Step    string
	Cluster string
	Err     error
	// Made is true when the step failed after hwk had begun making the
	// cluster, so there is something to clean up.
	Made bool
	// Interrupted is true when up was cancelled (Ctrl-C) rather than
	// failing; the step's own error then only echoes the cancellation.
	Interrupted bool
}

func (e *StepError) Error() string { return e.Step + ": " + e.Detail() }

// Detail returns the error without the step's name: what went wrong, and what
// to do about what is left.
func (e *StepError) Detail() string {
	msg := e.Err.Error()
	switch {
	case e.Interrupted || errors.Is(e.Err, context.Canceled):
		msg = "interrupted"
		if e.Made {
			msg += fmt.Sprintf("\n  cluster %s is half-made; remove it with `hwk down --name %s`", e.Cluster, e.Cluster)
		}
	case e.Made:
		msg += fmt.Sprintf("\n  cluster %s is left as it is for inspection (logs in its directory, `hwk get nodes --name %s`);\n  remove it with `hwk down --name %s`, then run up again",
			e.Cluster, e.Cluster, e.Cluster)
	}
	return msg
}

func (e *StepError) Unwrap() error { return e.Err }

// detailError shows a StepError under its own step line.
type detailError struct{ *StepError }

func (e detailError) Error() string { return e.Detail() }

// ProbeSubnet returns the node subnet up would give cfg now (the config's,
// checked, or the first free one), without reserving it. Drivers that do
// not work here are left out of the check.
func (p *Provider) ProbeSubnet(ctx context.Context, cfg *config.Cluster) (netip.Prefix, error) {
	c := &actions.Context{Config: cfg, Store: p.store(), Drivers: map[string]drivers.Driver{}, HostInterface: p.hostInterface}
	for _, n := range cfg.Nodes {
		d, err := p.Registry.Get(n.Driver)
		if err != nil {
			continue
		}
		if _, err := drivers.Preflight(ctx, d); err == nil {
			c.Drivers[n.Name] = d
		}
	}
	return actions.FindSubnet(ctx, c)
}
