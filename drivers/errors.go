package drivers

import (
	"fmt"
	"net/netip"
)

// UnavailableError is the error of a driver that cannot be used on this
// host now: why, and the command or step that fixes it.
type UnavailableError struct {
	Driver string
	Reason string
	Fix    string
}

func (e *UnavailableError) Error() string {
	msg := fmt.Sprintf("driver %s is not usable: %s", e.Driver, e.Reason)
	if e.Fix != "" {
		msg += "\n  fix: " + e.Fix
	}
	return msg
}

// ImageMissingError is a node image the driver cannot find.
type ImageMissingError struct {
	Driver string
	Image  string
	// Build is the command that makes the image.
	Build string
}

func (e *ImageMissingError) Error() string {
	return fmt.Sprintf("node image %s is not in %s\n  fix: build it with `%s`", e.Image, e.Driver, e.Build)
}

// SubnetInUseError is a cluster subnet that overlaps one the host already
// uses.
type SubnetInUseError struct {
	Subnet netip.Prefix
	// By names what holds the overlapping range: `docker network "x"
	// (172.31.0.0/16)`.
	By string
	// Remove is the command that removes it, only for what hwk made for
	// this very cluster (a leftover): never for another cluster's network
	// or one hwk did not make.
	Remove string
}

func (e *SubnetInUseError) Error() string {
	msg := fmt.Sprintf("subnet %s overlaps %s\n  fix: set networking.nodeSubnet in the cluster config to a range nothing else uses", e.Subnet, e.By)
	if e.Remove != "" {
		msg += fmt.Sprintf(", or remove it with `%s`", e.Remove)
	}
	return msg
}

// NameInUseError is a machine or network name already taken by something
// that is not this cluster's.
type NameInUseError struct {
	Name    string
	Cluster string
	// Owner is what holds the name: `docker container "hwk-cp"`.
	Owner string
	// Remove is the command that frees the name.
	Remove string
}

func (e *NameInUseError) Error() string {
	msg := fmt.Sprintf("%s is already used by %s, which is not part of cluster %s\n  fix: rename the node in the cluster config (or pick another cluster name)",
		e.Name, e.Owner, e.Cluster)
	if e.Remove != "" {
		msg += fmt.Sprintf(", or remove it with `%s`", e.Remove)
	}
	return msg
}
