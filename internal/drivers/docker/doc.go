// Package docker runs Linux nodes as containers of a Docker Engine, through
// the engine's API (github.com/moby/moby/client). A node container boots
// systemd and runs containerd and nested containers, so it behaves like the
// Linux VM the other drivers make.
//
// Files: driver.go (Driver, New, labels), preflight.go (Preflight,
// CheckImage), network.go (the cluster's bridge network, CheckSubnet),
// machine.go (node containers: Create ... List), node.go (Node,
// HostEndpoint), engine.go (the engine client and its errors), exec.go
// (docker exec as a node transport).
package docker
