// Package bootstrap turns a cluster description into Kubernetes: kubeadm
// configs, the Calico and Windows manifests, and the steps that run them on
// node handles. It knows Kubernetes and never a hypervisor: what it needs
// from a driver (addresses, whether a node is a container) arrives as plain
// values in Cluster.
package bootstrap

import (
	"fmt"
	"net/netip"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Cluster is what bootstrap needs to know about a cluster.
type Cluster struct {
	Name              string
	KubernetesVersion string
	PodSubnet         netip.Prefix
	ServiceSubnet     netip.Prefix
	APIServerPort     int
	ControlPlane      Node
	Workers           []Node
	// ExtraSANs are more names and addresses the API server's certificate
	// must hold: where the host reaches it (127.0.0.1 for a published
	// container port).
	ExtraSANs []string
	VXLANVNI  int
	VXLANPort int
	// Token is the pre-seeded bootstrap token every node joins with (see
	// NewToken).
	Token string
}

// Node is one node as bootstrap sees it.
type Node struct {
	Name string
	OS   config.OS
	IP   netip.Addr
	// WindowsVersion is "2022" or "2025" on Windows nodes.
	WindowsVersion string
	// Container is true for nodes that run on a kernel they did not boot
	// (containers on the host's, WSL2 distributions on WSL's, which has
	// no readable config and swap on by default), where some of kubeadm's
	// host checks cannot pass.
	Container bool
}

// FromConfig returns the Kubernetes side of a validated config. Which nodes
// are containers is the driver's business, so container reports it.
func FromConfig(c *config.Cluster, token string, container func(config.Node) bool) (Cluster, error) {
	pods, err := netip.ParsePrefix(c.Networking.PodSubnet)
	if err != nil {
		return Cluster{}, fmt.Errorf("networking.podSubnet: %w", err)
	}
	svcs, err := netip.ParsePrefix(c.Networking.ServiceSubnet)
	if err != nil {
		return Cluster{}, fmt.Errorf("networking.serviceSubnet: %w", err)
	}
	out := Cluster{
		Name:              c.Name,
		KubernetesVersion: c.KubernetesVersion,
		PodSubnet:         pods.Masked(),
		ServiceSubnet:     svcs.Masked(),
		APIServerPort:     c.Networking.APIServerPort,
		VXLANVNI:          c.Calico.VXLANVNI,
		VXLANPort:         c.Calico.VXLANPort,
		Token:             token,
	}
	for _, n := range c.Nodes {
		ip, err := netip.ParseAddr(n.IP)
		if err != nil {
			return Cluster{}, fmt.Errorf("node %s: ip: %w", n.Name, err)
		}
		bn := Node{Name: n.Name, OS: n.OS, IP: ip, WindowsVersion: n.WindowsVersion, Container: container(n)}
		if n.Role == config.ControlPlane {
			out.ControlPlane = bn
		} else {
			out.Workers = append(out.Workers, bn)
		}
	}
	if out.ControlPlane.Name == "" {
		return Cluster{}, fmt.Errorf("cluster %s has no control-plane node", c.Name)
	}
	return out, nil
}

// APIServerEndpoint returns where nodes reach the API server: the control
// plane's address on the node network.
func (c Cluster) APIServerEndpoint() netip.AddrPort {
	return netip.AddrPortFrom(c.ControlPlane.IP, uint16(c.APIServerPort))
}

// DNSServiceIP returns the cluster DNS service's address: the tenth of the
// service range, as kubeadm picks it.
func (c Cluster) DNSServiceIP() netip.Addr {
	a := c.ServiceSubnet.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a
}

// APIServiceIP returns the kubernetes.default service's address: the first of
// the service range.
func (c Cluster) APIServiceIP() netip.Addr {
	return c.ServiceSubnet.Masked().Addr().Next()
}

// DNSDomain is the cluster's DNS domain (kubeadm's default).
const DNSDomain = "cluster.local"
