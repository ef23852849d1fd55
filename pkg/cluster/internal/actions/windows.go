package actions

import (
	"context"

	"github.com/hwk-dev/hwk/internal/bootstrap"
)

// WindowsComponents applies what Windows nodes need before one joins:
// Calico's and kube-proxy's Windows DaemonSets and the RuntimeClasses.
// They select Windows nodes only, so a Linux-only cluster gets them too
// and can take a Windows node later.
type WindowsComponents struct{}

// Name implements Action.
func (WindowsComponents) Name() string { return "Installing Windows components" }

// Execute implements Action.
func (WindowsComponents) Execute(ctx context.Context, c *Context) error {
	m, err := bootstrap.WindowsManifests(c.Boot)
	if err != nil {
		return err
	}
	return apply(ctx, c, "windows-components", m)
}
