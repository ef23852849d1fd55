package actions

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/hwk-dev/hwk/pkg/bootstrap"
	"github.com/hwk-dev/hwk/pkg/node"
)

// Calico installs Calico for Linux from its manifest and turns on strict
// IPAM block affinity, which Windows nodes need from the start.
type Calico struct{}

// Name implements Action.
func (Calico) Name() string { return "Installing Calico " + bootstrap.CalicoVersion }

// Execute implements Action.
func (Calico) Execute(ctx context.Context, c *Context) error {
	manifest, err := bootstrap.CalicoManifest(c.Boot)
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

// apply applies manifests on the control plane, logging to the step log
// called name.
func apply(ctx context.Context, c *Context, name string, manifests []byte) error {
	h, err := c.Node(ctx, c.ControlPlane().Name)
	if err != nil {
		return err
	}
	return runLogged(ctx, c, name, func(w io.Writer) error { return bootstrap.Apply(ctx, h, manifests, w) },
		func(err error, tail, path string) error {
			return withLog(fmt.Errorf("kubectl apply (%s): %w", name, err), "last lines of kubectl", node.LastLines(tail, 10), path)
		})
}
