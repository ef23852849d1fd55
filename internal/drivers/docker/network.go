package docker

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/drivers"
)

// NetworkName returns the docker network of cluster.
func NetworkName(cluster string) string { return "hwk-" + cluster }

// EnsureNetwork implements drivers.Driver: one user-defined bridge per
// cluster, on the configured subnet, so node containers keep static
// addresses across restarts.
func (d *Driver) EnsureNetwork(ctx context.Context, n drivers.Network) error {
	c, err := d.client()
	if err != nil {
		return err
	}
	name := NetworkName(n.Cluster)
	subnet := n.Subnet.Masked()
	list, err := c.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		return d.wrap(c, fmt.Errorf("list docker networks: %w", err))
	}
	for _, nw := range list.Items {
		if nw.Name == name {
			return checkOwnNetwork(nw.Network, n.Cluster, subnet)
		}
	}
	if err := d.subnetConflict(c, list.Items, n); err != nil {
		return err
	}
	_, err = c.NetworkCreate(ctx, name, client.NetworkCreateOptions{
		Driver: "bridge",
		IPAM: &network.IPAM{Config: []network.IPAMConfig{{
			Subnet:  subnet,
			Gateway: n.Gateway(),
		}}},
		Labels: map[string]string{LabelCluster: n.Cluster},
	})
	if err != nil {
		if cerrdefs.IsConflict(err) {
			// Another hwk made it between our list and create: check it
			// as if we had found it.
			got, ierr := c.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
			if ierr == nil {
				return checkOwnNetwork(got.Network.Network, n.Cluster, subnet)
			}
		}
		return d.wrap(c, fmt.Errorf("create docker network %s: %w", name, err))
	}
	return nil
}

// CheckSubnet implements drivers.SubnetChecker.
func (d *Driver) CheckSubnet(ctx context.Context, n drivers.Network) error {
	c, err := d.client()
	if err != nil {
		return err
	}
	list, err := c.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		return d.wrap(c, fmt.Errorf("list docker networks: %w", err))
	}
	// The cluster's own network (and its bridge on the host) is no
	// conflict, as long as EnsureNetwork would take it as it is.
	for _, nw := range list.Items {
		if nw.Name == NetworkName(n.Cluster) {
			return checkOwnNetwork(nw.Network, n.Cluster, n.Subnet.Masked())
		}
	}
	return d.subnetConflict(c, list.Items, n)
}

// subnetConflict finds what holds an address range overlapping the
// subnet of a cluster that has no network yet: a docker network, or an
// interface of this host (when the engine runs here).
func (d *Driver) subnetConflict(c *client.Client, nets []network.Summary, n drivers.Network) error {
	subnet := n.Subnet.Masked()
	if by := overlappingNetwork(nets, subnet); by != "" {
		return &drivers.SubnetInUseError{Subnet: subnet, By: by}
	}
	if d.localEngine(c) {
		if by := drivers.OverlappingInterface(subnet); by != "" {
			return &drivers.SubnetInUseError{Subnet: subnet, By: by}
		}
	}
	return nil
}

func checkOwnNetwork(nw network.Network, cluster string, subnet netip.Prefix) error {
	if nw.Labels[LabelCluster] != cluster {
		return &drivers.NameInUseError{Name: nw.Name, Cluster: cluster, Owner: fmt.Sprintf("docker network %q", nw.Name), Remove: "docker network rm " + nw.Name}
	}
	for _, cfg := range nw.IPAM.Config {
		if cfg.Subnet.Masked() == subnet {
			return nil
		}
	}
	return fmt.Errorf("docker network %s exists with subnet %s, not %s\n  fix: delete the cluster (`hwk down --name %s`) and create it again",
		nw.Name, subnetsOf(nw), subnet, cluster)
}

// overlappingNetwork describes a docker network whose subnet overlaps
// subnet. It is another cluster's, or not hwk's at all: either way not
// ours to remove, so the fix is another subnet.
func overlappingNetwork(nets []network.Summary, subnet netip.Prefix) string {
	for _, nw := range nets {
		for _, cfg := range nw.IPAM.Config {
			if cfg.Subnet.IsValid() && cfg.Subnet.Overlaps(subnet) {
				if other := nw.Labels[LabelCluster]; other != "" {
					return fmt.Sprintf("docker network %q (%s) of hwk cluster %s", nw.Name, cfg.Subnet, other)
				}
				return fmt.Sprintf("docker network %q (%s)", nw.Name, cfg.Subnet)
			}
		}
	}
	return ""
}

func subnetsOf(nw network.Network) string {
	var s []string
	for _, cfg := range nw.IPAM.Config {
		s = append(s, cfg.Subnet.String())
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// DeleteNetwork implements drivers.Driver. It removes the cluster's network
// once no container uses it; a missing network is not an error.
func (d *Driver) DeleteNetwork(ctx context.Context, cluster string) error {
	c, err := d.client()
	if err != nil {
		return err
	}
	if err := d.removeProbes(ctx, c, cluster); err != nil {
		return err
	}
	name := NetworkName(cluster)
	nw, err := c.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return d.wrap(c, fmt.Errorf("inspect docker network %s: %w", name, err))
	}
	if nw.Network.Labels[LabelCluster] != cluster {
		// Never remove a network hwk did not make.
		return nil
	}
	if _, err := c.NetworkRemove(ctx, name, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		return d.wrap(c, fmt.Errorf("remove docker network %s: %w", name, err))
	}
	return nil
}

// removeProbes removes the privilege probes an up of cluster left behind
// (it was killed between making one and removing it).
func (d *Driver) removeProbes(ctx context.Context, c *client.Client, cluster string) error {
	list, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelProbeFor+"="+cluster)})
	if err != nil {
		return d.wrap(c, fmt.Errorf("list the probe containers of %s: %w", cluster, err))
	}
	for _, ctr := range list.Items {
		if _, err := c.ContainerRemove(ctx, ctr.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return d.wrap(c, fmt.Errorf("remove probe container %s: %w", ctr.ID, err))
		}
	}
	return nil
}
