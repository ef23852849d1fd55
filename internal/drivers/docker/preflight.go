package docker

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Preflight implements drivers.Driver.
func (d *Driver) Preflight(ctx context.Context) (string, error) {
	c, err := d.client()
	if err != nil {
		return "", err
	}
	drivers.Waiting(ctx, "the Docker engine at "+c.DaemonHost())
	info, err := c.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", d.wrap(c, err)
	}
	if info.Info.OSType != "" && info.Info.OSType != "linux" {
		return "", &drivers.UnavailableError{
			Driver: config.DriverDocker,
			Reason: fmt.Sprintf("the Docker engine runs %s containers; hwk's docker driver needs Linux containers", info.Info.OSType),
			Fix:    `switch Docker Desktop to Linux containers (tray icon → "Switch to Linux containers...")`,
		}
	}
	cg := info.Info.CgroupVersion
	if cg == "" {
		cg = "1"
	}
	return fmt.Sprintf("Docker Engine %s (API %s), %s/%s, cgroup v%s", info.Info.ServerVersion, c.ClientVersion(), info.Info.OSType, info.Info.Architecture, cg), nil
}

// CheckImage implements drivers.ImageChecker.
func (d *Driver) CheckImage(ctx context.Context, image string) error {
	c, err := d.client()
	if err != nil {
		return err
	}
	_, err = c.ImageInspect(ctx, image)
	if cerrdefs.IsNotFound(err) {
		return &drivers.ImageMissingError{Driver: "the Docker engine", Image: image, Build: BuildCommand}
	}
	if err != nil {
		return d.wrap(c, fmt.Errorf("inspect image %s: %w", image, err))
	}
	return nil
}
