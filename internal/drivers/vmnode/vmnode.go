// Package vmnode is what hwk's VM drivers share about a node: its cidata
// seed, its SSH identity (the cluster's key, which hwk logs in with, and
// the node's own host key, made by hwk and pinned before first boot) and
// the SSH handle made from them. Each driver keeps the files where it
// keeps its others.
package vmnode

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/format/isoimage"
	"github.com/hwk-dev/hwk/internal/sshkey"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// SeedLabel is the volume label cloud-init's and cloudbase-init's NoCloud
// sources look for, and hwk-seed too.
const SeedLabel = "cidata"

// hostKeyFiles maps the seed files that carry the node's SSH host key (made
// by hwk, so it is known before first boot) to their names on the seed.
var hostKeyFiles = map[string]string{
	"/etc/ssh/ssh_host_ed25519_key":     "ssh_host_ed25519_key",
	"/etc/ssh/ssh_host_ed25519_key.pub": "ssh_host_ed25519_key.pub",
}

// Net is what a node's seed records about its network.
type Net struct {
	Subnet netip.Prefix
	// MAC is the address the driver gives the node's NIC.
	MAC string
	DNS []netip.Addr
	// DHCP makes a Linux node ask the network's DHCP server, which has
	// its address reserved, so that the lease confirms the node took it.
	DHCP bool
}

// SeedFiles returns the files of a node's cidata seed, in two dialects of the
// same facts: hwk-seed's (hostname, network, authorized_keys, the SSH host
// key), read by the Linux node image and hwk-seed.exe, and NoCloud's
// (meta-data, network-config, user-data), read by cloudbase-init.
func SeedFiles(s drivers.MachineSpec, n Net) (map[string][]byte, error) {
	gw := drivers.Network{Subnet: n.Subnet}.Gateway()
	addr := netip.PrefixFrom(s.IP, n.Subnet.Bits())
	var dns []string
	for _, d := range n.DNS {
		dns = append(dns, d.String())
	}
	if len(dns) == 0 {
		return nil, fmt.Errorf("node %s: no DNS server for its seed", s.Name)
	}
	network := fmt.Appendf(nil, "ADDRESS=%s\nGATEWAY=%s\nDNS=%s\n", addr, gw, strings.Join(dns, " "))
	if n.DHCP && s.OS == config.Linux {
		network = append(network, "DHCP=yes\n"...)
	}
	files := map[string][]byte{
		"hostname": []byte(s.Name + "\n"),
		"network":  network,
	}
	if len(s.Seed.SSHAuthorizedKeys) > 0 {
		files["authorized_keys"] = []byte(strings.Join(s.Seed.SSHAuthorizedKeys, "\n") + "\n")
	}
	for _, f := range s.Seed.Files {
		name, ok := hostKeyFiles[f.Path]
		if !ok {
			return nil, fmt.Errorf("node %s: a VM node's seed cannot place %s (only the SSH host key)", s.Name, f.Path)
		}
		files[name] = f.Content
	}
	if len(s.Seed.AnswerFile) > 0 {
		if s.OS != config.Windows {
			return nil, fmt.Errorf("node %s: an answer file is for a Windows node's Setup, and the node runs %s", s.Name, s.OS)
		}
		// One of the two names Setup looks for at the root of
		// removable media (winimage.CloneAnswerFile).
		files["unattend.xml"] = s.Seed.AnswerFile
	}

	meta := map[string]any{
		"instance-id":    "hwk-" + s.Cluster + "-" + s.Name,
		"local-hostname": s.Name,
	}
	if len(s.Seed.SSHAuthorizedKeys) > 0 {
		meta["public-keys"] = s.Seed.SSHAuthorizedKeys
	}
	netcfg := map[string]any{
		"version": 1,
		"config": []any{map[string]any{
			"type":        "physical",
			"name":        "eth0",
			"mac_address": n.MAC,
			"subnets": []any{map[string]any{
				"type":            "static",
				"address":         addr.String(),
				"gateway":         gw.String(),
				"dns_nameservers": dns,
			}},
		}},
	}
	for name, v := range map[string]any{"meta-data": meta, "network-config": netcfg} {
		data, err := yaml.Marshal(v)
		if err != nil {
			return nil, err
		}
		files[name] = data
	}
	files["user-data"] = []byte("#cloud-config\n{}\n")
	return files, nil
}

// WriteSeedISO writes files to a new ISO 9660 image at path, labelled
// cidata, with names both Linux and Windows see as written.
func WriteSeedISO(path string, files map[string][]byte) error {
	list := make([]isoimage.File, 0, len(files))
	for name, data := range files {
		list = append(list, isoimage.File{Name: name, Data: data})
	}
	if err := isoimage.Write(path, SeedLabel, list); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	return nil
}

// Paths are where a driver keeps a node's identity: the cluster's SSH key
// (one per cluster, 0600) and the node's pinned host key, as an OpenSSH
// known_hosts file so that `ssh -o UserKnownHostsFile=` can use it too.
type Paths struct {
	ClusterKey string
	KnownHosts string
}

// AddIdentity returns spec with the node's identity added to its seed: the
// cluster's SSH key (made on first use; mu serializes that) may log in,
// and a new host key for the node, whose public half is pinned in
// p.KnownHosts so the node is recognized from its first answer.
func AddIdentity(spec drivers.MachineSpec, p Paths, mu *sync.Mutex) (drivers.MachineSpec, error) {
	mu.Lock()
	key, err := sshkey.LoadOrCreate(p.ClusterKey, "hwk cluster "+spec.Cluster)
	mu.Unlock()
	if err != nil {
		return spec, err
	}
	host, err := sshkey.New("hwk node " + spec.Name)
	if err != nil {
		return spec, err
	}
	hostPub, err := host.PublicKey()
	if err != nil {
		return spec, err
	}
	line := knownhosts.Line([]string{spec.IP.String()}, hostPub) + "\n"
	if err := state.WriteFileAtomic(p.KnownHosts, []byte(line), 0o644); err != nil {
		return spec, fmt.Errorf("node %s: keep its host key: %w", spec.Name, err)
	}
	spec.Seed.SSHAuthorizedKeys = append(slices.Clone(spec.Seed.SSHAuthorizedKeys), key.Public)
	spec.Seed.Files = append(slices.Clone(spec.Seed.Files),
		drivers.File{Path: "/etc/ssh/ssh_host_ed25519_key", Mode: 0o600, Content: host.Private},
		drivers.File{Path: "/etc/ssh/ssh_host_ed25519_key.pub", Mode: 0o644, Content: []byte(host.Public + "\n")},
	)
	return spec, nil
}

// Handle returns an SSH handle on the node at ip: the cluster's key, and only
// the host key pinned for the node accepted. Windows nodes are logged in
// to as Administrator, with PowerShell as the shell.
func Handle(name string, nodeOS config.OS, ip netip.Addr, p Paths) (*node.Node, error) {
	return HandleAt(name, nodeOS, ip, netip.AddrPortFrom(ip, 22), p)
}

// HandleAt works as Handle does, for a node the host reaches at addr rather
// than at its own address (a port forwarded to it), still accepting only the
// host key pinned for ip.
func HandleAt(name string, nodeOS config.OS, ip netip.Addr, addr netip.AddrPort, p Paths) (*node.Node, error) {
	key, err := sshkey.Load(p.ClusterKey)
	if err != nil {
		return nil, err
	}
	signer, err := key.Signer()
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(p.KnownHosts)
	if err != nil {
		return nil, fmt.Errorf("node %s: its pinned host key: %w", name, err)
	}
	_, hosts, hostKey, _, _, err := ssh.ParseKnownHosts(raw)
	if err != nil || !slices.Contains(hosts, ip.String()) {
		return nil, fmt.Errorf("node %s: %s pins no host key for %s (%v)", name, p.KnownHosts, ip, err)
	}
	user := "root"
	if nodeOS == config.Windows {
		user = "Administrator"
	}
	t, err := node.NewSSH(node.SSHConfig{
		Addr:        addr.String(),
		User:        user,
		Key:         signer,
		HostKey:     hostKey,
		Shell:       node.ShellFor(nodeOS),
		DialTimeout: 10 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	return node.New(name, nodeOS, t), nil
}
