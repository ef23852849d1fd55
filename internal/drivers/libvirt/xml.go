package libvirt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net/netip"

	"libvirt.org/go/libvirtxml"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// NetworkName returns the libvirt network of cluster.
func NetworkName(cluster string) string { return "hwk-" + cluster }

// bridgeName returns the network's Linux bridge. Interface names hold at most
// 15 characters and cluster names up to 32, so the name is a hash.
func bridgeName(cluster string) string {
	sum := sha256.Sum256([]byte(cluster))
	return "hwkbr-" + hex.EncodeToString(sum[:4])
}

// MAC returns the address of a node's NIC: QEMU's locally administered prefix
// 52:54:00 and the last three bytes of the node's IP, so the DHCP host
// entry, the lease and the node's address can be matched at a glance.
// Within one network (one subnet) they are unique.
func MAC(ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", b[1], b[2], b[3])
}

// dhcpHost is a DHCP reservation: the node named gets ip.
type dhcpHost struct {
	Name string
	IP   netip.Addr
}

// networkXML returns the cluster's NAT network: the gateway (the subnet's first
// address) on the host's bridge, and a DHCP reservation per node, so every
// node gets its static address whether it asks DHCP (Linux) or is
// configured from its seed.
func networkXML(n drivers.Network, hosts []dhcpHost) (string, error) {
	prefix := n.Subnet.Masked()
	if !prefix.Addr().Is4() {
		return "", fmt.Errorf("network %s: subnet %s is not IPv4", NetworkName(n.Cluster), prefix)
	}
	dhcp := &libvirtxml.NetworkDHCP{}
	for _, h := range hosts {
		if !prefix.Contains(h.IP) {
			return "", fmt.Errorf("network %s: node %s has address %s outside %s", NetworkName(n.Cluster), h.Name, h.IP, prefix)
		}
		dhcp.Hosts = append(dhcp.Hosts, libvirtxml.NetworkDHCPHost{MAC: MAC(h.IP), Name: h.Name, IP: h.IP.String()})
	}
	nw := &libvirtxml.Network{
		Name:    NetworkName(n.Cluster),
		Forward: &libvirtxml.NetworkForward{Mode: "nat"},
		Bridge:  &libvirtxml.NetworkBridge{Name: bridgeName(n.Cluster), STP: "on", Delay: "0"},
		IPs: []libvirtxml.NetworkIP{{
			Address: n.Gateway().String(),
			Prefix:  uint(prefix.Bits()),
			DHCP:    dhcp,
		}},
	}
	return nw.Marshal()
}

// domainSpec is what a node's domain is made of.
type domainSpec struct {
	drivers.MachineSpec
	// Disk is the node's qcow2 overlay; Seed its cidata ISO.
	Disk, Seed string
	// NVRAM is the node's own copy of the UEFI variables.
	NVRAM string
	// Console is the file the serial console is logged to.
	Console string
	// KVM reports whether the host's KVM works; otherwise QEMU emulates
	// the CPU (TCG).
	KVM bool
	// TPM adds an emulated TPM 2.0 (swtpm) to Windows guests.
	TPM bool
}

// domainXML returns a node's domain XML: a q35 machine with UEFI firmware
// picked by libvirt (Secure Boot off), a read-only seed disk and the serial
// console logged to a file; for Linux virtio disks and NIC; for Windows the
// AHCI disk and CD-ROM, the e1000e NIC, Hyper-V enlightenments, an RTC in
// UTC and, when asked, a TPM.
func domainXML(s domainSpec) (string, error) {
	// Why: the Linux image's systemd-boot is unsigned. Windows Server has
	// drivers for AHCI and e1000e out of the box (virtio needs the
	// virtio-win drivers in the image); its RTC is in UTC, the guest's
	// time zone.
	if s.CPUs < 1 || s.MemoryBytes <= 0 {
		return "", fmt.Errorf("node %s: %d CPUs and %d bytes of memory is no machine", s.Name, s.CPUs, s.MemoryBytes)
	}
	// Linux: the seed is a second virtio disk, since Debian's cloud
	// kernel has no AHCI driver. Windows: a SATA CD-ROM, where
	// cloudbase-init looks for config drives.
	diskBus, diskDev, seedDevice, seedBus, seedDev, nic := "virtio", "vda", "disk", "virtio", "vdb", "virtio"
	if s.OS == config.Windows {
		diskBus, diskDev, seedDevice, seedBus, seedDev, nic = "sata", "sda", "cdrom", "sata", "sdb", "e1000e"
	}
	typ, cpu := virtCPU(s.KVM)
	d := &libvirtxml.Domain{
		Type:        typ,
		Name:        s.Name,
		Description: fmt.Sprintf("hwk node %s (%s %s) of cluster %s", s.Name, s.OS, s.Role, s.Cluster),
		Metadata:    &libvirtxml.DomainMetadata{XML: metadata(s.MachineSpec)},
		Memory:      &libvirtxml.DomainMemory{Value: uint(s.MemoryBytes >> 20), Unit: "MiB"},
		VCPU:        &libvirtxml.DomainVCPU{Value: uint(s.CPUs)},
		CPU:         cpu,
		OS:          uefi(s.NVRAM),
		Features: &libvirtxml.DomainFeatureList{
			ACPI: &libvirtxml.DomainFeature{},
			APIC: &libvirtxml.DomainFeatureAPIC{},
		},
		OnPoweroff: "destroy",
		OnReboot:   "restart",
		OnCrash:    "destroy",
		Devices: &libvirtxml.DomainDeviceList{
			Disks: []libvirtxml.DomainDisk{
				{
					Device: "disk",
					Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2", Discard: "unmap"},
					Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: s.Disk}},
					Target: &libvirtxml.DomainDiskTarget{Dev: diskDev, Bus: diskBus},
				},
				{
					Device:   seedDevice,
					Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
					Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: s.Seed}},
					Target:   &libvirtxml.DomainDiskTarget{Dev: seedDev, Bus: seedBus},
					ReadOnly: &libvirtxml.DomainDiskReadOnly{},
				},
			},
			Interfaces: []libvirtxml.DomainInterface{{
				Source: &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: NetworkName(s.Cluster)}},
				MAC:    &libvirtxml.DomainInterfaceMAC{Address: MAC(s.IP)},
				Model:  &libvirtxml.DomainInterfaceModel{Type: nic},
			}},
		},
	}
	consoleAndRNG(d.Devices, s.Console)
	if s.OS == config.Windows {
		windows(d, s)
	}
	return d.Marshal()
}

// consoleAndRNG gives a domain the devices every hwk VM has: its first
// serial port (COM1, ttyS0) logged to the file console and also the
// domain's console, and a virtio RNG fed from the host.
func consoleAndRNG(devs *libvirtxml.DomainDeviceList, console string) {
	devs.Serials = []libvirtxml.DomainSerial{{
		Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
		Target: &libvirtxml.DomainSerialTarget{Port: new(uint)},
		Log:    &libvirtxml.DomainChardevLog{File: console, Append: "off"},
	}}
	devs.Consoles = []libvirtxml.DomainConsole{{
		Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
		Target: &libvirtxml.DomainConsoleTarget{Type: "serial"},
	}}
	devs.RNGs = []libvirtxml.DomainRNG{{
		Model:   "virtio",
		Backend: &libvirtxml.DomainRNGBackend{Random: &libvirtxml.DomainRNGBackendRandom{Device: "/dev/urandom"}},
	}}
}

// virtCPU returns the domain type and CPU for KVM (the host's CPU as it is)
// or TCG (every feature QEMU can emulate).
func virtCPU(kvm bool) (string, *libvirtxml.DomainCPU) {
	if kvm {
		return "kvm", &libvirtxml.DomainCPU{Mode: "host-passthrough"}
	}
	return "qemu", &libvirtxml.DomainCPU{Mode: "maximum"}
}

// uefi returns a q35 machine booting UEFI firmware libvirt picks, Secure Boot
// off, with its variables in nvram.
func uefi(nvram string) *libvirtxml.DomainOS {
	return &libvirtxml.DomainOS{
		Type:     &libvirtxml.DomainOSType{Arch: "x86_64", Machine: "q35", Type: "hvm"},
		Firmware: "efi",
		FirmwareInfo: &libvirtxml.DomainOSFirmwareInfo{Features: []libvirtxml.DomainOSFirmwareFeature{
			{Enabled: "no", Name: "secure-boot"},
		}},
		NVRam: &libvirtxml.DomainNVRam{NVRam: nvram},
	}
}

// windows adds what Windows guests want: an RTC in UTC, which Windows
// reads as its local time (its time zone is UTC), a TPM, and under KVM the Hyper-V enlightenments Windows uses
// when it finds them (fewer VM exits, a stable clock). They are KVM's:
// under TCG QEMU refuses to start with them ("kernel doesn't allow setting
// HyperV VP_INDEX").
func windows(d *libvirtxml.Domain, s domainSpec) {
	timers := []libvirtxml.DomainTimer{
		{Name: "rtc", TickPolicy: "catchup"},
		{Name: "pit", TickPolicy: "delay"},
		{Name: "hpet", Present: "no"},
	}
	if s.KVM {
		on := &libvirtxml.DomainFeatureState{State: "on"}
		d.Features.HyperV = &libvirtxml.DomainFeatureHyperV{
			Mode:        "custom",
			Relaxed:     on,
			VAPIC:       on,
			Spinlocks:   &libvirtxml.DomainFeatureHyperVSpinlocks{DomainFeatureState: libvirtxml.DomainFeatureState{State: "on"}, Retries: 8191},
			VPIndex:     on,
			Runtime:     on,
			Synic:       on,
			STimer:      &libvirtxml.DomainFeatureHyperVSTimer{DomainFeatureState: libvirtxml.DomainFeatureState{State: "on"}},
			Reset:       on,
			Frequencies: on,
		}
		timers = append(timers, libvirtxml.DomainTimer{Name: "hypervclock", Present: "yes"})
	}
	// Windows reads the RTC as local time, and both answer files set the
	// guest's time zone to UTC: an RTC on the host's local time would put
	// the guest off by the host's offset, and certificates minted on the
	// control plane would look not yet valid west of UTC (issue 26).
	d.Clock = &libvirtxml.DomainClock{Offset: "utc", Timer: timers}
	if s.TPM {
		d.Devices.TPMs = []libvirtxml.DomainTPM{{
			Model:   "tpm-crb",
			Backend: &libvirtxml.DomainTPMBackend{Emulator: &libvirtxml.DomainTPMBackendEmulator{Version: "2.0"}},
		}}
	}
}

// metadataNS is the namespace of hwk's element in a domain's metadata.
const metadataNS = "https://hwk.dev/libvirt/v1"

// metadata returns what hwk records in a domain so that a cluster's machines
// can be found and described from libvirt alone.
func metadata(s drivers.MachineSpec) string {
	m := nodeMetadata{NS: metadataNS, Cluster: s.Cluster, Name: s.Name, Role: string(s.Role), OS: string(s.OS), IP: s.IP.String()}
	out, err := xml.Marshal(m)
	if err != nil {
		// Only strings and attributes: encoding cannot fail.
		panic(err)
	}
	return string(out)
}

// nodeMetadata is hwk's element in a domain's <metadata>.
type nodeMetadata struct {
	XMLName xml.Name `xml:"hwk:node"`
	NS      string   `xml:"xmlns:hwk,attr"`
	Cluster string   `xml:"cluster,attr"`
	Name    string   `xml:"name,attr"`
	Role    string   `xml:"role,attr"`
	OS      string   `xml:"os,attr"`
	IP      string   `xml:"ip,attr"`
}
