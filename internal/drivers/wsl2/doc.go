// Package wsl2 is the WSL2 driver (experimental): it runs a cluster's
// Linux control plane as a WSL2 distribution, next to Windows workers on
// Hyper-V.
//
// A node is a distribution named hwk-NODE, imported from the node image's
// root file system tar into the node's directory, beside hwk's marker
// (distro.go); hwk touches no distribution without both. Create checks
// from inside the fresh distribution what only it can see (WSL's kernel,
// ports held in WSL's one network: facts_node.go, kernel.go), places the
// node's files (setup.go: wsl.conf with systemd as init, the node's
// stable address), and terminates it so that the next start boots
// systemd. Start attaches a keepalive session, since WSL stops a
// distribution without one. Commands run through `wsl.exe -d NAME -u root
// -e` (transport.go); wsl.exe's own output is read in either encoding and
// any language (wslexe.go).
//
// Networking, as decided: NAT mode, the default, with an address of the
// node's own. In NAT mode WSL's VM gets a new address on WSL's switch at
// every start; mirrored mode shares the host's addresses, but WSL does
// not carry traffic between a mirrored distribution and other VMs on the
// host (a WSL maintainer, microsoft/WSL#11494), which is where the Windows
// workers are. So the node keeps the address hwk gave it on the cluster's
// node network as a second address of its VM (hwk-wsl-net, at every
// boot), kubeadm's node IP and certificate name that address, and the
// host routes it to the VM's current address (hostroute.go). Up refuses
// other modes with the fix (CheckUp; Preflight, which down needs, does
// not); .wslconfig is never edited by hwk (it is global,
// and needs every distribution shut down). The host reaches the API
// server on 127.0.0.1 (WSL's localhost forwarding). All distributions
// share one VM and one network, so a host has at most one hwk WSL node,
// and the ports it listens on must be free there.
package wsl2
