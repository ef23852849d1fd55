package winseed

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hwk-dev/hwk/internal/sshkey"
	"github.com/hwk-dev/hwk/internal/testing/pscheck"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func keys(t *testing.T) (cluster, host sshkey.Pair) {
	t.Helper()
	var err error
	if cluster, err = sshkey.New("hwk-test"); err != nil {
		t.Fatal(err)
	}
	if host, err = sshkey.New("win-1"); err != nil {
		t.Fatal(err)
	}
	return cluster, host
}

func seedFS(t *testing.T) fstest.MapFS {
	cluster, host := keys(t)
	return fstest.MapFS{
		"hostname":                 {Data: []byte("hwk-win-1\n")},
		"network":                  {Data: []byte("ADDRESS=172.31.250.11/24\nGATEWAY=172.31.250.1\nDNS=172.31.250.1\n")},
		"authorized_keys":          {Data: []byte(cluster.Public + "\n")},
		"ssh_host_ed25519_key":     {Data: host.Private},
		"ssh_host_ed25519_key.pub": {Data: []byte(host.Public + "\n")},
		"meta-data":                {Data: []byte("instance-id: x\n")},
	}
}

func TestRead(t *testing.T) {
	fsys := seedFS(t)
	s, err := Read(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if s.Hostname != "hwk-win-1" || s.Address.String() != "172.31.250.11/24" || s.Gateway.String() != "172.31.250.1" ||
		len(s.DNS) != 1 || len(s.AuthorizedKeys) != 1 || !s.HasHostKey || len(s.ID) != 16 {
		t.Errorf("seed = %+v", s)
	}
	again, _ := Read(fsys)
	if again.ID != s.ID {
		t.Error("the same seed has two IDs")
	}
	fsys["hostname"] = &fstest.MapFile{Data: []byte("hwk-win-2\n")}
	if other, _ := Read(fsys); other.ID == s.ID {
		t.Error("a different seed has the same ID, so a re-seeded machine would skip it")
	}
}

func TestReadRefuses(t *testing.T) {
	_, otherHost := keys(t)
	for name, c := range map[string]struct {
		file, data string
		want       string
	}{
		"long name":    {"hostname", "hwk-windows-worker-1", "at most 15"},
		"dhcp":         {"network", "ADDRESS=172.31.250.11/24\nGATEWAY=172.31.250.1\nDNS=172.31.250.1\nDHCP=yes\n", "static address"},
		"no prefix":    {"network", "ADDRESS=172.31.250.11\nGATEWAY=172.31.250.1\nDNS=172.31.250.1\n", "ADDRESS=\"172.31.250.11\""},
		"far gateway":  {"network", "ADDRESS=172.31.250.11/24\nGATEWAY=10.0.0.1\nDNS=172.31.250.1\n", "gateway 10.0.0.1 is outside 172.31.250.0/24"},
		"no dns":       {"network", "ADDRESS=172.31.250.11/24\nGATEWAY=172.31.250.1\n", "no DNS server"},
		"bad line":     {"network", "ADDRESS 172.31.250.11/24\n", "want KEY=VALUE"},
		"no keys":      {"authorized_keys", "# nobody\n", "nobody could log in"},
		"bad key":      {"authorized_keys", "ssh-ed25519 notbase64\n", "authorized_keys"},
		"mismatch":     {"ssh_host_ed25519_key.pub", otherHost.Public, "do not match"},
		"private junk": {"ssh_host_ed25519_key", "junk", "host key"},
	} {
		t.Run(name, func(t *testing.T) {
			fsys := seedFS(t)
			fsys[c.file] = &fstest.MapFile{Data: []byte(c.data)}
			if _, err := Read(fsys); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
	fsys := seedFS(t)
	delete(fsys, "hostname")
	if _, err := Read(fsys); err == nil {
		t.Error("a seed without a hostname read")
	}
	fsys = seedFS(t)
	delete(fsys, "ssh_host_ed25519_key.pub")
	if _, err := Read(fsys); err == nil || !strings.Contains(err.Error(), "only half") {
		t.Errorf("half a host key: %v", err)
	}
}

// TestScript checks the PowerShell the seed becomes: golden (with a
// fixed seed), parsed by the PowerShell grammar, and the facts in it.
func TestScript(t *testing.T) {
	s, err := Read(seedFS(t))
	if err != nil {
		t.Fatal(err)
	}
	s.ID = "0123456789abcdef" // the keys are random; the golden file is not
	script := s.Script(`D:\`)
	path := filepath.Join("testdata", "apply.ps1")
	if *update {
		if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if script != string(want) {
		t.Errorf("script differs from %s (run with -update if meant):\n%s", path, script)
	}
	for _, fact := range []string{
		`$seed = 'D:\'`,
		`New-NetIPAddress -InterfaceIndex $if -IPAddress '172.31.250.11' -PrefixLength 24 -DefaultGateway '172.31.250.1'`,
		`-ServerAddresses @('172.31.250.1')`,
		`"$ssh\administrators_authorized_keys"`,
		// Administrators and SYSTEM by SID: the names are localized.
		`/inheritance:r /grant '*S-1-5-32-544:F' /grant '*S-1-5-18:F'`,
		`Copy-FromSeed 'ssh_host_ed25519_key' "$ssh\ssh_host_ed25519_key"`,
		`Rename-Computer -NewName 'hwk-win-1' -Force`,
	} {
		if !strings.Contains(script, fact) {
			t.Errorf("script lacks %q", fact)
		}
	}
	// No secret travels in the script: keys are copied from the seed.
	if strings.Contains(script, "PRIVATE KEY") || strings.Contains(script, s.AuthorizedKeys[0]) {
		t.Error("the script carries key material")
	}
	s.HasHostKey = false
	pscheck.Check(t, map[string]string{"apply.ps1": script, "apply-nohostkey.ps1": s.Script(`E:\`)})
}

// TestScriptAfterTheWait checks that hwk-seed.exe waits for Setup and the
// adapter (WaitReady, TestWaitReady) before it runs the script, which
// checks that one adapter is Up before it touches the address or the
// name, and does not wait itself.
func TestScriptAfterTheWait(t *testing.T) {
	s, err := Read(seedFS(t))
	if err != nil {
		t.Fatal(err)
	}
	script := s.Script(`D:\`)
	check := strings.Index(script, `if ($nics.Count -ne 1) {`)
	address := strings.Index(script, `NetTCPIP\New-NetIPAddress`)
	rename := strings.Index(script, `Rename-Computer`)
	if check < 0 || address < check || rename < address {
		t.Errorf("order: adapter check %d, address %d, rename %d; want each after the last", check, address, rename)
	}
	if strings.Contains(script, "Start-Sleep") {
		t.Error("the script waits itself, beside WaitReady")
	}
}
