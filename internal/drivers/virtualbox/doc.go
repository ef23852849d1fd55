// Package virtualbox runs nodes as VirtualBox VMs: the driver for Windows
// 10/11 Home (which has no Hyper-V), for Intel Macs, and for Linux hosts
// without libvirt. Each cluster gets a NAT Network of its own with the
// nodes at static addresses from their seeds; the host reaches the API
// server and each node's SSH through ports forwarded on 127.0.0.1, pinned
// when the node is made. Each node's disk is a differencing disk on the
// node image's VDI, registered once per image as a multi-attach base.
// Every operation is a VBoxManage call (Runner).
//
// Files: driver.go, preflight.go (Preflight, CheckImage), network.go (NAT
// Networks, port forwards), machine.go (VMs: Create ... List), node.go
// (Node, HostEndpoint), files.go (a cluster's files), media.go (disks,
// bases), install.go (Installer), vboxmanage.go and parse.go (VBoxManage
// and its output), host_other.go and host_windows.go (where VirtualBox is,
// the hypervisor).
package virtualbox
