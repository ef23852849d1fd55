package actions

import (
	"context"

	"github.com/hwk-dev/hwk/internal/kubeconfig"
)

// Kubeconfig adds the cluster to the user's kubeconfig as hwk-NAME.
type Kubeconfig struct{}

// Name implements Action.
func (Kubeconfig) Name() string { return "Writing kubeconfig" }

// Execute implements Action.
func (Kubeconfig) Execute(_ context.Context, c *Context) error {
	e, err := kubeconfig.EntryFrom(c.HostKubeconfig)
	if err != nil {
		return err
	}
	return kubeconfig.Merge(c.Kubeconfig, c.Config.Name, e, c.SetCurrentContext)
}
