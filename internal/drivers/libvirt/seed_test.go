package libvirt

import (
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"go.yaml.in/yaml/v3"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
	"github.com/hwk-dev/hwk/internal/format/isoimage"
	"github.com/hwk-dev/hwk/internal/sshkey"
	"github.com/hwk-dev/hwk/internal/winseed"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// TestSeedISO checks that the seed written is an ISO labelled cidata whose
// files, read back, say the same things in hwk-seed's and NoCloud's terms.
func TestSeedISO(t *testing.T) {
	s := spec("demo-win-1", config.Windows, config.Worker, "172.31.250.11")
	s.Seed.Files = []drivers.File{{Path: "/etc/ssh/ssh_host_ed25519_key.pub", Mode: 0o644, Content: []byte("ssh-ed25519 HOSTKEY\n")}}
	s.Seed.AnswerFile = []byte("<unattend/>")
	files, err := seedFiles(s, subnet)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "seed.iso")
	if err := vmnode.WriteSeedISO(path, files); err != nil {
		t.Fatal(err)
	}
	// Writing again replaces the image.
	if err := vmnode.WriteSeedISO(path, files); err != nil {
		t.Fatal(err)
	}
	label, got, err := isoimage.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if label != "cidata" {
		t.Errorf("label %q, want cidata", label)
	}
	for name, want := range files {
		if string(got[name]) != string(want) {
			t.Errorf("%s reads back %q, want %q", name, got[name], want)
		}
	}
	// Windows Setup looks for unattend.xml at the root of the disc.
	if string(got["unattend.xml"]) != "<unattend/>" {
		t.Errorf("answer file %q", got["unattend.xml"])
	}
	if string(got["network"]) != "ADDRESS=172.31.250.11/24\nGATEWAY=172.31.250.1\nDNS=172.31.250.1\n" || string(got["hostname"]) != "demo-win-1\n" {
		t.Errorf("hwk-seed files: %q %q", got["network"], got["hostname"])
	}
	if !strings.Contains(string(got["authorized_keys"]), "ssh-ed25519 AAAAC3") || string(got["ssh_host_ed25519_key.pub"]) != "ssh-ed25519 HOSTKEY\n" {
		t.Errorf("keys: %q %q", got["authorized_keys"], got["ssh_host_ed25519_key.pub"])
	}
	var meta struct {
		InstanceID string   `yaml:"instance-id"`
		Hostname   string   `yaml:"local-hostname"`
		Keys       []string `yaml:"public-keys"`
	}
	if err := yaml.Unmarshal(got["meta-data"], &meta); err != nil || meta.Hostname != "demo-win-1" || meta.InstanceID != "hwk-demo-demo-win-1" || len(meta.Keys) != 1 {
		t.Errorf("meta-data %+v (%v)", meta, err)
	}
	var netcfg struct {
		Version int
		Config  []struct {
			MAC     string `yaml:"mac_address"`
			Subnets []struct{ Type, Address, Gateway string }
		}
	}
	if err := yaml.Unmarshal(got["network-config"], &netcfg); err != nil || netcfg.Version != 1 || netcfg.Config[0].MAC != "52:54:00:1f:fa:0b" ||
		netcfg.Config[0].Subnets[0].Address != "172.31.250.11/24" || netcfg.Config[0].Subnets[0].Gateway != "172.31.250.1" {
		t.Errorf("network-config %+v (%v)", netcfg, err)
	}
}

func TestSeedRefusesOtherFiles(t *testing.T) {
	s := spec("demo-cp", config.Linux, config.ControlPlane, "172.31.250.10")
	s.Seed.Files = []drivers.File{{Path: "/etc/motd", Content: []byte("hi")}}
	_, err := seedFiles(s, subnet)
	if err == nil || err.Error() != "node demo-cp: a VM node's seed cannot place /etc/motd (only the SSH host key)" {
		t.Errorf("error %v", err)
	}
	s.Seed = drivers.Seed{AnswerFile: []byte("<unattend/>")}
	if _, err := seedFiles(s, subnet); err == nil || !strings.Contains(err.Error(), "answer file is for a Windows node") {
		t.Errorf("an answer file for a Linux node: %v", err)
	}
}

// TestWindowsSeedReadsAsHwkSeed checks that what the driver puts on a
// Windows node's seed is what hwk-seed for Windows (internal/winseed) reads:
// the contract between the two sides of first boot.
func TestWindowsSeedReadsAsHwkSeed(t *testing.T) {
	cluster, err := sshkey.New("cluster")
	if err != nil {
		t.Fatal(err)
	}
	host, err := sshkey.New("demo-win-1")
	if err != nil {
		t.Fatal(err)
	}
	s := spec("demo-win-1", config.Windows, config.Worker, "172.31.250.11")
	s.Seed.SSHAuthorizedKeys = []string{cluster.Public}
	s.Seed.Files = []drivers.File{
		{Path: "/etc/ssh/ssh_host_ed25519_key", Mode: 0o600, Content: host.Private},
		{Path: "/etc/ssh/ssh_host_ed25519_key.pub", Mode: 0o644, Content: []byte(host.Public + "\n")},
	}
	files, err := seedFiles(s, subnet)
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: data}
	}
	ws, err := winseed.Read(fsys)
	if err != nil {
		t.Fatalf("hwk-seed for Windows refuses the driver's seed: %v", err)
	}
	if ws.Hostname != "demo-win-1" || ws.Address.String() != "172.31.250.11/24" || ws.Gateway.String() != "172.31.250.1" ||
		len(ws.DNS) != 1 || ws.DNS[0].String() != "172.31.250.1" || !ws.HasHostKey || ws.AuthorizedKeys[0] != cluster.Public {
		t.Errorf("hwk-seed reads %+v", ws)
	}
}
