package actions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Calico installs Calico for Linux from its manifest and turns on strict
// IPAM block affinity, which Windows nodes need from the start; meanwhile
// the Linux workers join, which needs only the API server.
type Calico struct{}

// Name implements Action.
func (Calico) Name() string { return "Installing Calico " + bootstrap.CalicoVersion }

// Describe implements Describer: the step names when workers join during it.
func (a Calico) Describe(c *Context) string {
	switch n := len(c.Workers(config.Linux)); n {
	case 0:
		return a.Name()
	case 1:
		return a.Name() + " and joining the Linux worker"
	default:
		return fmt.Sprintf("%s and joining %d Linux workers", a.Name(), n)
	}
}

// Execute implements Action.
func (Calico) Execute(ctx context.Context, c *Context) error {
	errs := make(chan error, 1)
	go func() { errs <- joinWorkers(ctx, c, config.Linux) }()
	return errors.Join(installCalico(ctx, c), <-errs)
}

func installCalico(ctx context.Context, c *Context) error {
	manifest, err := bootstrap.CalicoManifest(c.Boot, linuxNodesHaveCalicoPlugins(ctx, c))
	if err != nil {
		return err
	}
	if err := apply(ctx, c, "calico", manifest); err != nil {
		return err
	}
	// The IPAMConfig kind exists once the API server has taken in
	// Calico's CRDs, a moment after they were created.
	err = retry(ctx, time.Minute, time.Second, func(ctx context.Context) error {
		return apply(ctx, c, "calico-ipamconfig", bootstrap.IPAMConfigManifest())
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("set Calico IPAM strictAffinity: %w", err)
	}
	return err
}

// linuxNodesHaveCalicoPlugins reports whether every Linux node's image
// put Calico's CNI plugins in its root (bootstrap.NodeHasCalicoPlugins),
// asking the nodes at once.
func linuxNodesHaveCalicoPlugins(ctx context.Context, c *Context) bool {
	linux := append([]config.Node{c.ControlPlane()}, c.Workers(config.Linux)...)
	err := parallel(linux, func(n config.Node) error {
		h, err := c.Node(ctx, n.Name)
		if err != nil {
			return err
		}
		if !bootstrap.NodeHasCalicoPlugins(ctx, h) {
			if c.Log != nil {
				c.Log.Info("node has no record of Calico's CNI plugins from its image; install-cni copies them", "node", n.Name, "image", bootstrap.CalicoCNIImage)
			}
			return errors.New("no plugins")
		}
		return nil
	})
	return err == nil
}

// CoreDNS installs CoreDNS (the phase kubeadm init skipped) and
// calico-kube-controllers. It comes after WaitNetwork: their pods need
// calico-node running on the node they land on (see
// bootstrap.InstallCoreDNS).
type CoreDNS struct{}

// Name implements Action.
func (CoreDNS) Name() string { return "Installing CoreDNS and calico-kube-controllers" }

// Execute implements Action.
func (CoreDNS) Execute(ctx context.Context, c *Context) error {
	h, err := c.Node(ctx, c.ControlPlane().Name)
	if err != nil {
		return err
	}
	if err := runLogged(ctx, c, "coredns", func(w io.Writer) error { return bootstrap.InstallCoreDNS(ctx, h, w) },
		func(err error, tail, path string) error {
			return withLog(fmt.Errorf("install CoreDNS (kubeadm init phase addon coredns): %w", err), "last lines of kubeadm", hostexec.LastLines(tail, 10), path)
		}); err != nil {
		return err
	}
	controllers, err := bootstrap.CalicoControllersManifest()
	if err != nil {
		return err
	}
	return apply(ctx, c, "calico-kube-controllers", controllers)
}

// apply applies manifests on the control plane, logging to the step log
// called name.
func apply(ctx context.Context, c *Context, name string, manifests []byte) error {
	h, err := c.Node(ctx, c.ControlPlane().Name)
	if err != nil {
		return err
	}
	return runLogged(ctx, c, name, func(w io.Writer) error { return bootstrap.Apply(ctx, h, manifests, w) },
		func(err error, tail, path string) error {
			return withLog(fmt.Errorf("kubectl apply (%s): %w", name, err), "last lines of kubectl", hostexec.LastLines(tail, 10), path)
		})
}
