// Package wsl2 is the WSL2 driver (experimental): it runs a cluster's
// Linux control plane as a WSL2 distribution, next to Windows workers on
// Hyper-V. A node is a distribution, hwk-NODE (see Driver); in WSL's NAT
// mode it keeps an address of its own on the cluster's node network,
// which the host routes to WSL's VM (network.go). All distributions share
// one VM and one network, so a host has at most one hwk WSL node.
//
// Files: driver.go, preflight.go (Preflight, CheckUp, Limits, .wslconfig),
// facts.go (the host's facts), network.go, machine.go (Create ... List),
// node.go (Node, HostEndpoint), distro.go (distributions and markers),
// setup.go, facts_node.go and kernel.go (a new node's setup and checks),
// hostroute.go (the host's route to the node), transport.go and wslexe.go
// (wsl.exe), buildkernel.go (node image builds in a WSL distribution).
package wsl2
