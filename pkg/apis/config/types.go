// Package config is hwk's versioned cluster configuration, apiVersion
// hwk.dev/v1alpha1, kind Cluster: the types, strict loading, flag overrides,
// defaults and validation.
//
// A config goes through the same four steps wherever it is used, in this
// order: Load (strict decoding of the file), ApplyOverrides (command-line
// flags win over the file), SetDefaults (fill what is still empty), Validate
// (report every problem at once).
package config

import "strings"

// APIVersion and Kind identify the only config version there is so far.
const (
	APIVersion = "hwk.dev/v1alpha1"
	Kind       = "Cluster"
)

// Role is what a node does in the cluster.
type Role string

// The node roles.
const (
	ControlPlane Role = "control-plane"
	Worker       Role = "worker"
)

// OS is a node's operating system.
type OS string

// The node operating systems.
const (
	Linux   OS = "linux"
	Windows OS = "windows"
)

// Cluster is the whole cluster description.
type Cluster struct {
	// APIVersion is the config's version: hwk.dev/v1alpha1, the only one
	// so far.
	APIVersion string `yaml:"apiVersion" json:"apiVersion"`
	// Kind is always Cluster.
	Kind string `yaml:"kind" json:"kind"`

	// Name is the cluster name: it prefixes node names and forms the
	// kubeconfig context hwk-NAME.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// KubernetesVersion is a full version such as v1.35.4.
	KubernetesVersion string `yaml:"kubernetesVersion,omitempty" json:"kubernetesVersion,omitempty"`

	// Autostart starts the cluster's VMs with the host (libvirt domains
	// autostart, Hyper-V VMs start if they were running), unless hwk stop
	// stopped them. Container nodes always come back with their engine.
	Autostart bool `yaml:"autostart,omitempty" json:"autostart,omitempty"`

	// Networking holds the cluster's address ranges.
	Networking Networking `yaml:"networking,omitempty" json:"networking"`
	// Nodes are the cluster's machines: exactly one Linux control plane,
	// and workers of either OS. Default: a Linux control plane and a
	// Windows worker.
	Nodes []Node `yaml:"nodes,omitempty" json:"nodes,omitempty"`
	// Calico configures the network plugin.
	Calico Calico `yaml:"calico,omitempty" json:"calico"`
	// Images is where node images come from.
	Images Images `yaml:"images,omitempty" json:"images"`

	// pos is the file line of each field path outside nodes (see Node.pos).
	pos map[string]int
	// autoSubnet is set by SetDefaults when the config named neither a
	// node subnet nor a node address, so the subnet is hwk's to choose.
	autoSubnet bool
}

// Networking holds the three address ranges of the cluster and the API
// server's port.
type Networking struct {
	// NodeSubnet is the NAT network hwk creates for the nodes; its first
	// address is the host-side gateway, nodes get static addresses in it.
	// When neither it nor any node's ip is set, up chooses the first free
	// /24 from 172.31.250.0/24.
	NodeSubnet string `yaml:"nodeSubnet,omitempty" json:"nodeSubnet,omitempty"`
	// PodSubnet is where pods get their addresses; each node gets a /24
	// of it.
	PodSubnet string `yaml:"podSubnet,omitempty" json:"podSubnet,omitempty"`
	// ServiceSubnet is where Services get their cluster IPs; at most a
	// /12.
	ServiceSubnet string `yaml:"serviceSubnet,omitempty" json:"serviceSubnet,omitempty"`
	// APIServerPort is the port the API server listens on, on the
	// control-plane node.
	APIServerPort int `yaml:"apiServerPort,omitempty" json:"apiServerPort,omitempty"`
}

// Node is one machine of the cluster.
type Node struct {
	// Name is the machine's and the Kubernetes node's name. Default:
	// NAME-cp, NAME-linux-N, NAME-win-N; Windows names have at most 15
	// characters.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Role is control-plane or worker (the default).
	Role Role `yaml:"role,omitempty" json:"role,omitempty"`
	// OS is linux (the default) or windows.
	OS OS `yaml:"os,omitempty" json:"os,omitempty"`
	// Driver runs the node's machine: docker, hyperv, libvirt, virtualbox
	// or wsl2. Default: the first that works on this host for the OS
	// (hwk get drivers).
	Driver string `yaml:"driver,omitempty" json:"driver,omitempty"`
	// IP is the node's static address in networking.nodeSubnet. Default:
	// .10 for the control plane, .11 and up for workers.
	IP string `yaml:"ip,omitempty" json:"ip,omitempty"`
	// CPUs the machine gets. Default: 2.
	CPUs int `yaml:"cpus,omitempty" json:"cpus,omitempty"`
	// Memory the machine gets, a Kubernetes quantity (4Gi, 4096Mi): on
	// Hyper-V the most its VM's Dynamic Memory grows to, from a start of
	// 2Gi (Linux) or 3Gi (Windows). Default: 4Gi for the control plane,
	// 2Gi for a Linux worker, 6Gi for a Windows node.
	Memory string `yaml:"memory,omitempty" json:"memory,omitempty"`
	// Disk is the size the node's disk may grow to, a Kubernetes
	// quantity. Default: 20Gi for Linux nodes, 64Gi for Windows nodes.
	Disk string `yaml:"disk,omitempty" json:"disk,omitempty"`
	// Image names a cached node image, or is a reference (with a tag or
	// digest) to pull one from; empty means the default image for the
	// node's OS and the cluster's Kubernetes version.
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
	// WindowsVersion is the Windows Server release of a Windows node:
	// "2022" (the default) or "2025" (experimental).
	WindowsVersion string `yaml:"windowsVersion,omitempty" json:"windowsVersion,omitempty"`

	// pos is the file line of each of this node's fields, "" for the node
	// itself. It travels with the node, so a line stays right when flags
	// add or drop nodes.
	pos map[string]int
}

// Calico configures the cluster network plugin. Windows nodes only support
// VXLAN with a VNI of 4096 or more on UDP port 4789.
type Calico struct {
	// Version is the Calico release whose manifests hwk embeds.
	Version string `yaml:"version,omitempty" json:"version,omitempty"`
	// VXLANVNI is the VXLAN network identifier: 4096 or more when there
	// are Windows nodes.
	VXLANVNI int `yaml:"vxlanVNI,omitempty" json:"vxlanVNI,omitempty"`
	// VXLANPort is the VXLAN UDP port: 4789 when there are Windows nodes.
	VXLANPort int `yaml:"vxlanPort,omitempty" json:"vxlanPort,omitempty"`
}

// Images is where node images come from when the cache lacks them.
type Images struct {
	// Registry is where hwk pulls the Linux node images it pins (by
	// digest) from, instead of where they were published: a mirror that
	// keeps their digests, e.g. registry.example.com/hwk-dev. The image is
	// REGISTRY/node@DIGEST.
	Registry string `yaml:"registry,omitempty" json:"registry,omitempty"`
}

// IsImageRef reports whether a node's image setting is a reference to pull
// rather than the name of a cached image (which has no '/', ':' or '@').
func IsImageRef(image string) bool { return strings.ContainsAny(image, "/:@") }

// HasWindows reports whether any node runs Windows.
func (c *Cluster) HasWindows() bool {
	for _, n := range c.Nodes {
		if n.OS == Windows {
			return true
		}
	}
	return false
}
