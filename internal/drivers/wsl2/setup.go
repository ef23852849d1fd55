package wsl2

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/filetar"
	"github.com/hwk-dev/hwk/pkg/node"
)

// netScript gives the node its stable address at every boot (see network.go).
//
//go:embed hwk-wsl-net.sh
var netScript []byte

// netUnit runs netScript before the node's services. WSL configures eth0
// from outside the distribution while systemd boots, so a start that
// finds no default route yet is retried.
const netUnit = `# Written by hwk: this node's stable address on WSL's network.
[Unit]
Description=hwk: the node's stable address
Before=containerd.service kubelet.service
DefaultDependencies=no
After=sysinit.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/hwk-wsl-net
Restart=on-failure
RestartSec=1

[Install]
WantedBy=multi-user.target
RequiredBy=kubelet.service
`

// wslConf returns the distribution's /etc/wsl.conf (learn.microsoft.com/
// windows/wsl/wsl-config): systemd as init, root as the user, WSL keeping
// the hostname and resolv.conf, and nothing of Windows inside the node
// (no drive mounts, no Windows programs or PATH), which a node has no
// use for and which the kubelet would otherwise scan.
func wslConf(hostname string) []byte {
	return []byte(`# Written by hwk: this distribution is a Kubernetes node.
[boot]
systemd = true

[user]
default = root

[network]
hostname = ` + hostname + `
generateHosts = true
generateResolvConf = true

[automount]
enabled = false
mountFsTab = false

[interop]
enabled = false
appendWindowsPath = false
`)
}

// setupUnits are what the node's first boot must not start: the network
// is WSL's (systemd-networkd would take eth0 over from it, and waiting
// for it online would hold boot up), and the node is reached through
// wsl.exe, not SSH.
var setupUnits = []string{"systemd-networkd.service", "systemd-networkd.socket", "systemd-networkd-wait-online.service", "ssh.service", "ssh.socket"}

// setupFiles returns the files the driver places in a new distribution.
func setupFiles(spec drivers.MachineSpec, subnet netip.Prefix) []drivers.File {
	env := fmt.Sprintf("# Written by hwk: the node's address and the network routed to it.\nADDRESS=%s\nSUBNET=%s\n", spec.IP, subnet.Masked())
	files := []drivers.File{
		{Path: "/etc/wsl.conf", Mode: 0o644, Content: wslConf(spec.Name)},
		{Path: "/etc/hostname", Mode: 0o644, Content: []byte(spec.Name + "\n")},
		{Path: "/etc/hwk/wsl-net", Mode: 0o644, Content: []byte(env)},
		{Path: "/usr/local/sbin/hwk-wsl-net", Mode: 0o755, Content: netScript},
		{Path: "/etc/systemd/system/hwk-wsl-net.service", Mode: 0o644, Content: []byte(netUnit)},
	}
	if len(spec.Seed.SSHAuthorizedKeys) > 0 {
		keys := strings.Join(spec.Seed.SSHAuthorizedKeys, "\n") + "\n"
		files = append(files, drivers.File{Path: "/root/.ssh/authorized_keys", Mode: 0o600, Content: []byte(keys)})
	}
	return append(files, spec.Seed.Files...)
}

// setupScript runs in the distribution after the files are in place. It
// needs no running systemd: systemctl enable and mask only make links.
var setupScript = "set -e\n" +
	"systemctl mask " + strings.Join(setupUnits, " ") + " >/dev/null 2>&1\n" +
	"systemctl enable hwk-wsl-net.service >/dev/null 2>&1\n" +
	"systemctl is-enabled " + strings.Join(nodeUnits, " ") + " || :\n"

// nodeUnits must be enabled in a node: the image's services and hwk's.
var nodeUnits = []string{"containerd.service", "kubelet.service", "hwk-wsl-net.service"}

// setup makes a freshly imported distribution a node: it places
// setupFiles as one tar on stdin, then runs setupScript (on stdin too,
// which keeps it clear of Windows' command-line quoting). n is the
// distribution's handle (or, in the Linux tests, a chroot's).
func setup(ctx context.Context, n *node.Node, spec drivers.MachineSpec, subnet netip.Prefix) error {
	archive, err := filetar.Pack(setupFiles(spec, subnet))
	if err != nil {
		return fmt.Errorf("set up node %s: %w", spec.Name, err)
	}
	if err := n.Run(ctx, node.Cmd{Args: []string{"tar", "-x", "-p", "-C", "/", "-f", "-"}, Stdin: bytes.NewReader(archive)}); err != nil {
		return fmt.Errorf("set up node %s: place its files: %w", spec.Name, err)
	}
	var stdout strings.Builder
	err = n.Run(ctx, node.Cmd{Args: []string{"sh", "-s", "hwk-setup"}, Stdin: strings.NewReader(setupScript), Stdout: &stdout})
	out := stdout.String()
	if err != nil {
		return fmt.Errorf("set up node %s: enable its services: %w", spec.Name, err)
	}
	// is-enabled prints a state per unit it knows, and nothing for one
	// it does not.
	states := strings.Fields(out)
	if len(states) != len(nodeUnits) || slices.ContainsFunc(states, func(s string) bool { return s != "enabled" }) {
		return fmt.Errorf("set up node %s: the node's services are not all enabled (%s: %s); use a node image from `hwk node-image build linux`",
			spec.Name, strings.Join(nodeUnits, ", "), strings.Join(states, ", "))
	}
	return nil
}
