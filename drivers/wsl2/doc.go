// Package wsl2 is the start of the WSL2 driver (experimental), which is to
// run a cluster's Linux control plane as a WSL2 distribution. What it has
// so far: the kernel check a node's preflight runs inside the
// distribution (kernel.go), running wsl.exe and reading its output in
// either encoding and any language (wslexe.go), the node handle's
// transport over `wsl.exe -d NAME -u root -e` (transport.go), and
// importing, stopping and removing only the distributions hwk made
// (distro.go: the hwk- prefix and a marker beside the disk), and the
// host's verdict (facts.go gathers it, preflight.go judges it).
//
// Networking, as decided: WSL's default NAT mode gives its VM a new
// address at every start, which a Windows worker on Hyper-V's hwk switch
// could not keep reaching, so the driver requires mirrored mode (Windows
// 11 22H2+), in which the distribution shares the host's addresses and
// ports: the control plane is reached at an address of the host on the
// hwk switch, which survives WSL restarts, and the certificate's SANs name
// it. NAT mode is refused with the fix; .wslconfig is never edited by hwk
// (it is global, and needs every distribution shut down). All
// distributions share one VM and network, so a host has at most one hwk
// WSL node, and ports 6443 and 10250 must be free on the host.
//
// The driver is not in hwk's registry until it can make a node.
package wsl2
