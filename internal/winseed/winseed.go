// Package winseed is the portable half of hwk-seed for Windows, the
// first-boot program in hwk's Windows node image: it reads a node's seed
// (the files every VM driver puts on its cidata disk, in hwk-seed's
// dialect) and writes the PowerShell that makes the machine that node:
// static address, DNS, the cluster's SSH key for Administrator, the SSH
// host key hwk pinned, and the computer name. cmd/hwk-seed runs it on
// Windows; everything here runs and is tested anywhere.
package winseed

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"regexp"
	"strings"

	"golang.org/x/crypto/ssh"
)

// The seed's files, as internal/drivers/libvirt writes them.
const (
	fileHostname       = "hostname"
	fileNetwork        = "network"
	fileAuthorizedKeys = "authorized_keys"
	fileHostKey        = "ssh_host_ed25519_key"
	fileHostKeyPub     = "ssh_host_ed25519_key.pub"
)

// Seed is what a node's seed holds.
type Seed struct {
	Hostname       string
	Address        netip.Prefix
	Gateway        netip.Addr
	DNS            []netip.Addr
	AuthorizedKeys []string
	// HasHostKey is true when the seed carries the SSH host key hwk
	// pinned for the node.
	HasHostKey bool
	// ID identifies the seed's content: a machine applies a seed once.
	ID string
}

var netbiosRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,14}$`)

// Read reads and checks the seed in fsys (the root of the cidata disk).
func Read(fsys fs.FS) (*Seed, error) {
	read := func(name string, required bool) ([]byte, error) {
		b, err := fs.ReadFile(fsys, name)
		if errors.Is(err, fs.ErrNotExist) && !required {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
		return b, nil
	}
	h := sha256.New()
	var s Seed
	var errs []string

	host, err := read(fileHostname, true)
	if err != nil {
		return nil, err
	}
	s.Hostname = strings.TrimSpace(string(host))
	if !netbiosRE.MatchString(s.Hostname) || strings.Trim(s.Hostname, "0123456789") == "" {
		errs = append(errs, fmt.Sprintf("hostname %q: Windows needs at most 15 letters, digits and hyphens, not all digits", s.Hostname))
	}

	netw, err := read(fileNetwork, true)
	if err != nil {
		return nil, err
	}
	kv, err := parseKV(netw)
	if err != nil {
		errs = append(errs, err.Error())
	}
	if kv["DHCP"] == "yes" {
		errs = append(errs, "network: DHCP=yes, but Windows nodes take the static address hwk gave them")
	}
	if s.Address, err = netip.ParsePrefix(kv["ADDRESS"]); err != nil || !s.Address.Addr().Is4() {
		errs = append(errs, fmt.Sprintf("network: ADDRESS=%q is not an IPv4 address with a prefix length", kv["ADDRESS"]))
	}
	if s.Gateway, err = netip.ParseAddr(kv["GATEWAY"]); err != nil {
		errs = append(errs, fmt.Sprintf("network: GATEWAY=%q is not an address", kv["GATEWAY"]))
	} else if s.Address.IsValid() && !s.Address.Masked().Contains(s.Gateway) {
		errs = append(errs, fmt.Sprintf("network: gateway %s is outside %s", s.Gateway, s.Address.Masked()))
	}
	for _, d := range strings.Fields(strings.ReplaceAll(kv["DNS"], ",", " ")) {
		a, err := netip.ParseAddr(d)
		if err != nil {
			errs = append(errs, fmt.Sprintf("network: DNS server %q is not an address", d))
			continue
		}
		s.DNS = append(s.DNS, a)
	}

	if len(s.DNS) == 0 {
		errs = append(errs, "network: no DNS server")
	}

	keys, err := read(fileAuthorizedKeys, false)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(keys), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line)); err != nil {
			errs = append(errs, fmt.Sprintf("authorized_keys: %v", err))
			continue
		}
		s.AuthorizedKeys = append(s.AuthorizedKeys, line)
	}
	if len(s.AuthorizedKeys) == 0 {
		errs = append(errs, "authorized_keys: no key, so nobody could log in over SSH")
	}

	priv, err := read(fileHostKey, false)
	if err != nil {
		return nil, err
	}
	pub, err := read(fileHostKeyPub, false)
	if err != nil {
		return nil, err
	}
	if priv != nil || pub != nil {
		if err := checkHostKey(priv, pub); err != nil {
			errs = append(errs, err.Error())
		}
		s.HasHostKey = true
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("seed: %s", strings.Join(errs, "; "))
	}
	for _, part := range [][]byte{host, netw, keys, priv, pub} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	s.ID = hex.EncodeToString(h.Sum(nil))[:16]
	return &s, nil
}

func parseKV(b []byte) (map[string]string, error) {
	kv := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return kv, fmt.Errorf("network line %d: want KEY=VALUE, got %q", n, line)
		}
		kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return kv, nil
}

func checkHostKey(priv, pub []byte) error {
	if priv == nil || pub == nil {
		return errors.New("host key: the seed has only half of the ed25519 key pair")
	}
	signer, err := ssh.ParsePrivateKey(priv)
	if err != nil {
		return fmt.Errorf("host key: %v", err)
	}
	want, _, _, _, err := ssh.ParseAuthorizedKey(pub)
	if err != nil {
		return fmt.Errorf("host key .pub: %v", err)
	}
	if !bytes.Equal(signer.PublicKey().Marshal(), want.Marshal()) {
		return errors.New("host key: the private and public halves do not match")
	}
	return nil
}

// Marker is where a node records the seed it applied.
const Marker = `C:\ProgramData\hwk\seed.applied`

// Script returns the PowerShell that applies s, reading the key files from
// the seed at dir (the cidata drive, "D:\"), so no secret is on its command
// line. It does nothing when the marker records s as applied, and restarts
// the machine last when the computer name changes.
func (s *Seed) Script(dir string) string {
	var b strings.Builder
	q := psQuote
	fmt.Fprintf(&b, `$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'
$seed = %s
$marker = %s
$id = %s
if ((Microsoft.PowerShell.Management\Test-Path -LiteralPath $marker) -and ((Microsoft.PowerShell.Management\Get-Content -Raw -LiteralPath $marker).Trim() -eq $id)) {
    Microsoft.PowerShell.Utility\Write-Output "hwk-seed: seed $id is applied already"
    exit 0
}

# Network: the one connected adapter gets the node's static address; hwk
# owns the subnet and never relies on DHCP. hwk-seed has waited for Setup
# to finish and for this adapter to be Up (WaitReady) before this runs.
$nics = @(NetAdapter\Get-NetAdapter -Physical | Microsoft.PowerShell.Core\Where-Object Status -eq 'Up')
if ($nics.Count -ne 1) {
    throw "hwk-seed: want one connected network adapter, found $($nics.Count)"
}
$if = $nics[0].ifIndex
NetTCPIP\Set-NetIPInterface -InterfaceIndex $if -AddressFamily IPv4 -Dhcp Disabled
NetTCPIP\Get-NetIPAddress -InterfaceIndex $if -AddressFamily IPv4 -ErrorAction SilentlyContinue | NetTCPIP\Remove-NetIPAddress -Confirm:$false
NetTCPIP\Get-NetRoute -InterfaceIndex $if -DestinationPrefix '0.0.0.0/0' -ErrorAction SilentlyContinue | NetTCPIP\Remove-NetRoute -Confirm:$false
NetTCPIP\New-NetIPAddress -InterfaceIndex $if -IPAddress %s -PrefixLength %d -DefaultGateway %s | Microsoft.PowerShell.Core\Out-Null
DnsClient\Set-DnsClientServerAddress -InterfaceIndex $if -ServerAddresses @(%s)

# SSH: the cluster's key for Administrator, readable by Administrators and
# SYSTEM only (sshd ignores the file otherwise), and the host key hwk
# pinned for this node.
$ssh = 'C:\ProgramData\ssh'
Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path $ssh | Microsoft.PowerShell.Core\Out-Null
function Protect([string]$path) {
    # icacls' own complaint, on stderr, must not end the script before
    # the throw below names the file (see internal/testing/pscatalog).
    $ErrorActionPreference = 'Continue'
    # By SID: the group names are localized (Administratoren, Järjestelmä).
    & icacls.exe $path /inheritance:r /grant '*S-1-5-32-544:F' /grant '*S-1-5-18:F' | Microsoft.PowerShell.Core\Out-Null
    if ($LASTEXITCODE -ne 0) { throw "hwk-seed: icacls $path exited with $LASTEXITCODE" }
}
# The seed is a CD, whose files Windows marks read-only; a copy keeps the
# attribute (CopyFile), which would stop the next seed's copy or an edit.
function Copy-FromSeed([string]$name, [string]$to) {
    Microsoft.PowerShell.Management\Copy-Item -Force -LiteralPath (Microsoft.PowerShell.Management\Join-Path $seed $name) -Destination $to
    $copy = Microsoft.PowerShell.Management\Get-Item -LiteralPath $to
    $copy.IsReadOnly = $false
}
Copy-FromSeed 'authorized_keys' "$ssh\administrators_authorized_keys"
Protect "$ssh\administrators_authorized_keys"
`, q(dir), q(Marker), q(s.ID), q(s.Address.Addr().String()), s.Address.Bits(), q(s.Gateway.String()), joinQuoted(s.DNS))
	if s.HasHostKey {
		b.WriteString(`Copy-FromSeed 'ssh_host_ed25519_key' "$ssh\ssh_host_ed25519_key"
Protect "$ssh\ssh_host_ed25519_key"
Copy-FromSeed 'ssh_host_ed25519_key.pub' "$ssh\ssh_host_ed25519_key.pub"
`)
	}
	fmt.Fprintf(&b, `Microsoft.PowerShell.Management\Set-Service -Name sshd -StartupType Automatic
Microsoft.PowerShell.Management\Restart-Service -Name sshd

# The answer files Setup has used: sysprep's copy holds the image's
# Administrator password (hidden, not encrypted).
foreach ($answer in "$env:SystemRoot\Panther\unattend.xml", "$env:SystemRoot\Panther\Unattend\unattend.xml", "$env:SystemRoot\System32\Sysprep\unattend.xml", 'C:\hwk\sysprep-unattend.xml') {
    Microsoft.PowerShell.Management\Remove-Item -Force -LiteralPath $answer -ErrorAction SilentlyContinue
}

# The node's disk can be larger than the image's (nodes[].disk): C: takes
# what there is. A failure leaves the node working, on a smaller C:.
try {
    $size = (Storage\Get-Partition -DriveLetter C).Size
    $max = (Storage\Get-PartitionSupportedSize -DriveLetter C).SizeMax
    if ($max -gt ($size + 16777216)) {
        Storage\Resize-Partition -DriveLetter C -Size $max
        Microsoft.PowerShell.Utility\Write-Output "hwk-seed: C: grown from $size to $max bytes"
    }
} catch {
    Microsoft.PowerShell.Utility\Write-Output "hwk-seed: C: stays at its size: $($_.Exception.Message)"
}

Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path (Microsoft.PowerShell.Management\Split-Path -Parent $marker) | Microsoft.PowerShell.Core\Out-Null
Microsoft.PowerShell.Management\Set-Content -LiteralPath $marker -Value $id
# The name last: it takes a restart, after which this finds the marker.
if ($env:COMPUTERNAME -ne %s) {
    Microsoft.PowerShell.Management\Rename-Computer -NewName %s -Force
    Microsoft.PowerShell.Management\Restart-Computer -Force
}
Microsoft.PowerShell.Utility\Write-Output "hwk-seed: applied seed $id"
`, q(s.Hostname), q(s.Hostname))
	return b.String()
}

// Scripts returns every PowerShell script this package makes, one of each
// variant, by the declaration that makes it: for the check of every
// script hwk sends to Windows (internal/testing/pscatalog).
func Scripts() map[string]string {
	s := &Seed{Hostname: "demo-win-1", Address: netip.MustParsePrefix("172.31.250.11/24"), Gateway: netip.MustParseAddr("172.31.250.1"),
		DNS: []netip.Addr{netip.MustParseAddr("192.168.1.1"), netip.MustParseAddr("1.1.1.1")}, HasHostKey: true, ID: "0123abcd"}
	out := map[string]string{"Seed.Script": s.Script(`D:\`), "imageStateQuery": imageStateQuery, "adaptersQuery": adaptersQuery}
	s.HasHostKey = false
	out["Seed.Script/no-host-key"] = s.Script(`D:\`)
	return out
}

func joinQuoted(addrs []netip.Addr) string {
	q := make([]string, len(addrs))
	for i, a := range addrs {
		q[i] = psQuote(a.String())
	}
	return strings.Join(q, ", ")
}

func psQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
