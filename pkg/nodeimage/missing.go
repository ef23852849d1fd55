package nodeimage

import (
	"fmt"
	"strings"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// NoImageError is a node whose image is not cached and cannot be pulled,
// with every way to get it.
type NoImageError struct {
	Node    config.Node
	Version string
	Format  Format
	Driver  string
	// Ref is what hwk tried to pull, and Err why that cannot be done.
	Ref string
	Err error
}

func (e *NoImageError) Unwrap() error { return e.Err }

func (e *NoImageError) Error() string {
	what := "Linux"
	if e.Node.OS == config.Windows {
		what = "Windows Server " + e.Node.WindowsVersion
	}
	msg := fmt.Sprintf("no cached %s node image for Kubernetes %s has the %s format the %s driver needs", what, e.Version, e.Format, e.Driver)
	switch {
	case e.Ref != "":
		msg += fmt.Sprintf(", and it cannot be pulled from %s:\n%s", e.Ref, indent(e.Err.Error(), "  "))
	case e.Err != nil:
		msg += fmt.Sprintf(" (%v)", e.Err)
	}
	return msg + "\n  fix, one of:\n" + WaysForward(e.Node, e.Version, e.Format)
}

// WaysForward returns the ways to get the node image of n that the cache
// lacks, one per line, for a fix: line.
func WaysForward(n config.Node, version string, format Format) string {
	build := buildCommand(n, version, format)
	if n.OS == config.Windows {
		return fmt.Sprintf("  - build it (Windows images are never downloaded: Windows Server may not be redistributed): `%s`\n  - load one your team saved: `hwk node-image load -i FILE`\n  - pull it from your team's registry: set nodes[].image to its reference", build)
	}
	return fmt.Sprintf("  - load an archive made with `hwk node-image save` where the image is: `hwk node-image load -i FILE`\n  - build it here and go on: `hwk up --build-image` (or on its own: `%s`); it needs a Docker engine and takes minutes from release downloads, tens of minutes from source the first time\n  - pull it from another registry: `hwk up --image REGISTRY/REPO:TAG` (or set images.registry to a mirror)", build)
}

// buildCommand returns the command that makes a missing node image.
func buildCommand(n config.Node, version string, format Format) string {
	cmd := fmt.Sprintf("hwk node-image build linux --formats %s", format)
	if n.OS == config.Windows {
		cmd = fmt.Sprintf("hwk node-image build windows --iso PATH --version %s --formats %s", n.WindowsVersion, format)
	}
	if version != config.DefaultKubernetesVersion {
		cmd += " --kubernetes-version " + version
	}
	return cmd
}

func indent(s, pad string) string {
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}
