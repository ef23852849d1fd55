package libvirt

import (
	"fmt"
	"net/netip"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/isoimage"
)

// seedLabel is the volume label cloud-init's and cloudbase-init's NoCloud
// sources look for, and hwk-seed too.
const seedLabel = "cidata"

// hostKeyFiles maps the seed files that carry the node's SSH host key (made
// by hwk, so it is known before first boot) to their names on the seed.
var hostKeyFiles = map[string]string{
	"/etc/ssh/ssh_host_ed25519_key":     "ssh_host_ed25519_key",
	"/etc/ssh/ssh_host_ed25519_key.pub": "ssh_host_ed25519_key.pub",
}

// seedFiles are the files of a node's cidata seed, in two dialects of the
// same facts: hwk-seed's (hostname, network, authorized_keys, the SSH host
// key), read by the Linux node image, and NoCloud's (meta-data,
// network-config, user-data), read by cloudbase-init on Windows.
func seedFiles(s drivers.MachineSpec, subnet netip.Prefix) (map[string][]byte, error) {
	gw := drivers.Network{Subnet: subnet}.Gateway()
	addr := netip.PrefixFrom(s.IP, subnet.Bits())
	network := fmt.Appendf(nil, "ADDRESS=%s\nGATEWAY=%s\nDNS=%s\n", addr, gw, gw)
	if s.OS == config.Linux {
		// The node asks DHCP, which has its address reserved, so that
		// the lease confirms the node took it.
		network = append(network, "DHCP=yes\n"...)
	}
	files := map[string][]byte{
		"hostname": []byte(s.Name + "\n"),
		// libvirt's dnsmasq answers DNS on the gateway.
		"network": network,
	}
	if len(s.Seed.SSHAuthorizedKeys) > 0 {
		files["authorized_keys"] = []byte(strings.Join(s.Seed.SSHAuthorizedKeys, "\n") + "\n")
	}
	for _, f := range s.Seed.Files {
		name, ok := hostKeyFiles[f.Path]
		if !ok {
			return nil, fmt.Errorf("node %s: the libvirt driver's seed cannot place %s (only the SSH host key)", s.Name, f.Path)
		}
		files[name] = f.Content
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
			"mac_address": MAC(s.IP),
			"subnets": []any{map[string]any{
				"type":            "static",
				"address":         addr.String(),
				"gateway":         gw.String(),
				"dns_nameservers": []string{gw.String()},
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

// writeSeedISO writes files to a new ISO 9660 image at path, labelled
// cidata, with names both Linux and Windows see as written.
func writeSeedISO(path string, files map[string][]byte) error {
	list := make([]isoimage.File, 0, len(files))
	for name, data := range files {
		list = append(list, isoimage.File{Name: name, Data: data})
	}
	if err := isoimage.Write(path, seedLabel, list); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	return nil
}
