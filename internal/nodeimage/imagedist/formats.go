package imagedist

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// PackFormats returns the formats of m to pack: those named in the
// comma-separated list, each of which m must still have, or with an
// empty list every format m has (the docker format only when the engine
// holds it).
func PackFormats(ctx context.Context, m *nodeimage.Manifest, list string, docker func() (client.APIClient, error)) ([]nodeimage.Format, error) {
	if list != "" {
		fs, err := nodeimage.ParseFormats(list)
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			if !m.Has(ctx, f, docker) {
				where := "in the cache"
				if f == nodeimage.FormatDocker {
					where = "in the Docker engine"
				}
				return nil, fmt.Errorf("node image %s's %s format is not %s; rebuild it (%s)", m.Name, f, where, rebuildCommand(m, f))
			}
		}
		return fs, nil
	}
	var out []nodeimage.Format
	for _, f := range nodeimage.Formats {
		if m.Has(ctx, f, docker) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("node image %s has none of its formats any more (%s)", m.Name, rebuildCommand(m, ""))
	}
	return out, nil
}

// rebuildCommand returns the command that makes m's format f (any with f
// "") again.
func rebuildCommand(m *nodeimage.Manifest, f nodeimage.Format) string {
	if m.OS == string(config.Windows) {
		return "hwk node-image build windows --iso PATH"
	}
	cmd := "hwk node-image build linux --source " + string(m.Source) + " --kubernetes-version " + m.KubernetesVersion
	if f != "" {
		cmd += " --formats " + string(f)
	}
	return cmd
}
