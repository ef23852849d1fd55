// Package wsl2 is the start of the WSL2 driver (experimental), which is to
// run a cluster's Linux control plane as a WSL2 distribution. What it has
// so far: the kernel check a node's preflight runs inside the
// distribution (kernel.go), running wsl.exe and reading its output in
// either encoding and any language (wslexe.go), the node handle's
// transport over `wsl.exe -d NAME -u root -e` (transport.go), and
// importing, stopping and removing only the distributions hwk made
// (distro.go: the hwk- prefix and a marker beside the disk). It is not in
// hwk's registry of drivers until it can make a node.
package wsl2
