package libvirt

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// StopGrace is how long Stop waits for a guest to shut down when asked
// (ACPI) before it pulls the plug.
const StopGrace = time.Minute

// Create implements drivers.Driver.
func (d *Driver) Create(ctx context.Context, spec drivers.MachineSpec) error {
	if err := d.validate(spec); err != nil {
		return err
	}
	virtual, err := qcow2Size(spec.Image)
	if err != nil {
		return err
	}
	return d.with(func(l *golibvirt.Libvirt) error {

		meta, found, err := domainMeta(l, spec.Name)
		if err != nil {
			return err
		}
		if found {
			if meta == nil || meta.Cluster != spec.Cluster {
				return &drivers.NameInUseError{Name: spec.Name, Cluster: spec.Cluster, Owner: fmt.Sprintf("libvirt domain %q", spec.Name),
					Remove: "virsh -c qemu:///system undefine --nvram " + spec.Name}
			}
			if spec.Start {
				return startDomain(l, spec.Name)
			}
			return nil
		}

		subnet, err := clusterSubnet(l, spec.Cluster)
		if err != nil {
			return err
		}
		if !subnet.Contains(spec.IP) || spec.IP == subnet.Addr() || spec.IP == (drivers.Network{Subnet: subnet}).Gateway() {
			return fmt.Errorf("node %s: address %s is not a node address of the cluster's subnet %s", spec.Name, spec.IP, subnet)
		}
		// The seed's files are checked before anything is written.
		if _, err := seedFiles(spec, subnet); err != nil {
			return err
		}
		a, _, err := d.accel.get(ctx, l, true)
		if err != nil {
			return err
		}

		seed, err := d.seed(spec)
		if err != nil {
			return err
		}
		files, err := seedFiles(seed, subnet)
		if err != nil {
			return err
		}
		pool, err := ensurePool(l)
		if err != nil {
			return err
		}
		base, err := d.baseVolume(ctx, l, pool, spec.Image)
		if err != nil {
			return err
		}
		// Leftovers of a Create that failed before the domain was defined.
		for _, v := range []string{overlayName(spec.Ref), seedName(spec.Ref)} {
			if err := deleteVolume(l, pool, v); err != nil {
				return err
			}
		}
		// The overlay is made at the size the node asks for, which the
		// guest grows its partition into at boot; never below the image's.
		size, warning := drivers.DiskSize(spec.Name, spec.DiskBytes, int64(virtual))
		if warning != "" {
			d.warn(warning)
		}
		disk, err := overlayVolume(l, pool, overlayName(spec.Ref), base, uint64(size))
		if err != nil {
			return err
		}
		seedPath, err := d.uploadSeed(l, pool, spec.Ref, files)
		if err != nil {
			return err
		}
		if err := setDHCPHost(l, NetworkName(spec.Cluster), dhcpHost{Name: spec.Name, IP: spec.IP}, true); err != nil {
			return err
		}
		domXML, err := domainXML(domainSpec{
			MachineSpec: spec,
			Disk:        disk,
			Seed:        seedPath,
			NVRAM:       poolDir + "/" + nvramName(spec.Ref),
			Console:     d.ConsoleLog(spec.Ref),
			KVM:         a.KVM,
			TPM:         a.TPM && spec.OS == config.Windows,
		})
		if err != nil {
			return err
		}
		dom, err := l.DomainDefineXML(domXML)
		if err != nil {
			return fmt.Errorf("define domain %s: %w", spec.Name, err)
		}
		if spec.Autostart {
			if err := l.DomainSetAutostart(dom, 1); err != nil {
				return fmt.Errorf("node %s: autostart: %w", spec.Name, err)
			}
		}
		if spec.Start {
			return startDomain(l, spec.Name)
		}
		return nil
	})
}

// validate refuses a spec before anything is made.
func (d *Driver) validate(spec drivers.MachineSpec) error {
	return drivers.CheckVM(spec, drivers.VMRules{Driver: "libvirt", Hypervisor: "libvirt", Guests: d.GuestOSes(), ImageFormat: "a qcow2 disk", MinMemory: 256 << 20})
}

// seed returns spec's seed plus the node's identity (vmnode.AddIdentity),
// kept in the node's 0700 directory.
func (d *Driver) seed(spec drivers.MachineSpec) (drivers.MachineSpec, error) {
	if err := os.MkdirAll(d.files().Machine(spec.Ref), 0o700); err != nil {
		return spec, fmt.Errorf("node %s: %w", spec.Name, err)
	}
	return vmnode.AddIdentity(spec, d.files().Paths(spec.Ref), &d.mu)
}

// uploadSeed writes the node's seed ISO and streams it into the pool. The
// local copy holds the node's private host key, so it lives only as long
// as the upload, in the node's 0700 directory.
func (d *Driver) uploadSeed(l *golibvirt.Libvirt, pool golibvirt.StoragePool, r drivers.Ref, files map[string][]byte) (string, error) {
	iso := filepath.Join(d.files().Machine(r), ".cidata.iso")
	defer os.Remove(iso)
	if err := vmnode.WriteSeedISO(iso, files); err != nil {
		return "", err
	}
	return uploadFile(l, pool, seedName(r), "raw", iso, nil)
}

// Start implements drivers.Driver.
func (d *Driver) Start(_ context.Context, r drivers.Ref) error {
	return d.with(func(l *golibvirt.Libvirt) error {
		if err := d.own(l, r); err != nil {
			return err
		}
		return startDomain(l, r.Name)
	})
}

// Stop implements drivers.Driver: an ACPI shutdown, then power off after
// StopGrace.
func (d *Driver) Stop(ctx context.Context, r drivers.Ref) error {
	return d.with(func(l *golibvirt.Libvirt) error {
		if err := d.own(l, r); err != nil {
			return err
		}
		return stopDomain(ctx, l, r.Name, StopGrace)
	})
}

// own checks that r's domain exists and is the cluster's.
func (d *Driver) own(l *golibvirt.Libvirt, r drivers.Ref) error {
	meta, found, err := domainMeta(l, r.Name)
	switch {
	case err != nil:
		return err
	case !found || meta == nil || meta.Cluster != r.Cluster:
		return fmt.Errorf("node %s of cluster %s has no libvirt domain\n  fix: remove the cluster with `hwk down --name %s` and make it again", r.Name, r.Cluster, r.Cluster)
	}
	return nil
}

// Delete implements drivers.Driver: the domain with its UEFI variables,
// the node's disk and seed, its DHCP reservation and files; the network
// too when no node of the cluster is left.
func (d *Driver) Delete(_ context.Context, r drivers.Ref) error {
	return d.with(func(l *golibvirt.Libvirt) error {
		meta, found, err := domainMeta(l, r.Name)
		if err != nil {
			return err
		}
		// A domain of that name that is not the cluster's is left alone; the
		// volumes below are named for the cluster, so they are its own.
		if found && meta != nil && meta.Cluster == r.Cluster {
			if err := removeDomain(l, r.Name); err != nil {
				return err
			}
		}
		if pool, err := l.StoragePoolLookupByName(poolName); err == nil {
			for _, v := range []string{overlayName(r), seedName(r), nvramName(r)} {
				if err := deleteVolume(l, pool, v); err != nil {
					return err
				}
			}
		} else if !isCode(err, golibvirt.ErrNoStoragePool) {
			return fmt.Errorf("look up storage pool %s: %w", poolName, err)
		}
		if err := setDHCPHost(l, NetworkName(r.Cluster), dhcpHost{Name: r.Name}, false); err != nil {
			return err
		}
		if err := os.RemoveAll(d.files().Machine(r)); err != nil {
			return fmt.Errorf("remove the files of node %s: %w", r.Name, err)
		}
		left, err := listMachines(l, r.Cluster)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return d.deleteNetwork(l, r.Cluster)
		}
		return nil
	})
}

// Inspect implements drivers.Driver.
func (d *Driver) Inspect(_ context.Context, r drivers.Ref) (drivers.Machine, error) {
	return withConn(d, func(l *golibvirt.Libvirt) (drivers.Machine, error) {
		m, err := inspect(l, r.Name)
		if err != nil {
			return drivers.Machine{}, err
		}
		if m.State == drivers.StateMissing || m.Cluster != r.Cluster {
			return drivers.Machine{Ref: r, State: drivers.StateMissing}, nil
		}
		return m, nil
	})
}

// List implements drivers.Driver.
func (d *Driver) List(_ context.Context, cluster string) ([]drivers.Machine, error) {
	return withConn(d, func(l *golibvirt.Libvirt) ([]drivers.Machine, error) {
		return listMachines(l, cluster)
	})
}

// domainMeta reads hwk's metadata of the named domain. found reports whether
// the domain exists; meta is nil when it exists but hwk did not make it.
func domainMeta(l *golibvirt.Libvirt, name string) (meta *nodeMetadata, found bool, err error) {
	dom, err := l.DomainLookupByName(name)
	if golibvirt.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up domain %s: %w", name, err)
	}
	meta, err = readMetadata(l, dom)
	return meta, true, err
}

func readMetadata(l *golibvirt.Libvirt, dom golibvirt.Domain) (*nodeMetadata, error) {
	raw, err := l.DomainGetMetadata(dom, int32(golibvirt.DomainMetadataElement), golibvirt.OptString{metadataNS}, golibvirt.DomainAffectCurrent)
	if isCode(err, golibvirt.ErrNoDomainMetadata) || golibvirt.IsNotFound(err) {
		// Not hwk's, or gone since it was listed.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metadata of domain %s: %w", dom.Name, err)
	}
	// libvirt hands back the element asked for by namespace, without the
	// namespace.
	var m struct {
		XMLName xml.Name
		Cluster string `xml:"cluster,attr"`
		Name    string `xml:"name,attr"`
		Role    string `xml:"role,attr"`
		OS      string `xml:"os,attr"`
		IP      string `xml:"ip,attr"`
	}
	if err := xml.Unmarshal([]byte(raw), &m); err != nil {
		return nil, fmt.Errorf("metadata of domain %s: %w", dom.Name, err)
	}
	return &nodeMetadata{NS: metadataNS, Cluster: m.Cluster, Name: m.Name, Role: m.Role, OS: m.OS, IP: m.IP}, nil
}

// inspect describes the named domain from its metadata and state.
func inspect(l *golibvirt.Libvirt, name string) (drivers.Machine, error) {
	dom, err := l.DomainLookupByName(name)
	if golibvirt.IsNotFound(err) {
		return drivers.Machine{Ref: drivers.Ref{Name: name}, State: drivers.StateMissing}, nil
	}
	if err != nil {
		return drivers.Machine{}, fmt.Errorf("look up domain %s: %w", name, err)
	}
	return describe(l, dom)
}

func describe(l *golibvirt.Libvirt, dom golibvirt.Domain) (drivers.Machine, error) {
	meta, err := readMetadata(l, dom)
	if err != nil || meta == nil {
		return drivers.Machine{Ref: drivers.Ref{Name: dom.Name}, State: drivers.StateMissing}, err
	}
	s, _, err := l.DomainGetState(dom, 0)
	if golibvirt.IsNotFound(err) {
		return drivers.Machine{Ref: drivers.Ref{Name: dom.Name}, State: drivers.StateMissing}, nil
	}
	if err != nil {
		return drivers.Machine{}, fmt.Errorf("state of domain %s: %w", dom.Name, err)
	}
	ip, _ := netip.ParseAddr(meta.IP)
	state, detail := machineState(golibvirt.DomainState(s))
	return drivers.Machine{
		Ref:    drivers.Ref{Cluster: meta.Cluster, Name: dom.Name},
		Role:   config.Role(meta.Role),
		OS:     config.OS(meta.OS),
		State:  state,
		Detail: detail,
		IP:     ip,
	}, nil
}

// machineState maps libvirt's domain states to hwk's.
func machineState(s golibvirt.DomainState) (drivers.State, string) {
	switch s {
	case golibvirt.DomainRunning:
		return drivers.StateRunning, "running"
	case golibvirt.DomainShutoff:
		return drivers.StateStopped, "shut off"
	case golibvirt.DomainPaused:
		return drivers.StateOther, "paused"
	case golibvirt.DomainShutdown:
		return drivers.StateOther, "shutting down"
	case golibvirt.DomainCrashed:
		return drivers.StateOther, "crashed"
	case golibvirt.DomainPmsuspended:
		return drivers.StateOther, "suspended"
	case golibvirt.DomainBlocked:
		return drivers.StateRunning, "blocked"
	}
	return drivers.StateOther, fmt.Sprintf("state %d", s)
}

// listMachines returns every domain hwk made for cluster.
func listMachines(l *golibvirt.Libvirt, cluster string) ([]drivers.Machine, error) {
	doms, _, err := l.ConnectListAllDomains(1, 0)
	if err != nil {
		return nil, fmt.Errorf("list libvirt domains: %w", err)
	}
	var out []drivers.Machine
	for _, dom := range doms {
		m, err := describe(l, dom)
		if err != nil {
			return nil, err
		}
		if m.State != drivers.StateMissing && m.Cluster == cluster {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b drivers.Machine) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SetAutostart implements drivers.Autostarter: libvirtd starts an
// autostart domain whenever it starts, even one hwk stop shut down.
func (d *Driver) SetAutostart(_ context.Context, m drivers.Ref, on bool) error {
	return d.with(func(l *golibvirt.Libvirt) error {
		dom, err := l.DomainLookupByName(m.Name)
		if err != nil {
			return fmt.Errorf("node %s: %w", m.Name, err)
		}
		flag := int32(0)
		if on {
			flag = 1
		}
		if err := l.DomainSetAutostart(dom, flag); err != nil {
			return fmt.Errorf("node %s: autostart: %w", m.Name, err)
		}
		return nil
	})
}

// StartupMemory implements drivers.MemoryCommitter: QEMU maps a VM's
// memory when it starts and the host backs it as the guest touches it,
// which a Windows guest does to all of it at boot (it zeroes its free
// pages); a node counts as all its memory.
func (d *Driver) StartupMemory(_ config.OS, memory int64) int64 { return memory }

// domainState returns a domain's state; a missing domain is DomainNostate
// with found false.
func domainState(l *golibvirt.Libvirt, name string) (state golibvirt.DomainState, found bool, err error) {
	d, err := l.DomainLookupByName(name)
	if golibvirt.IsNotFound(err) {
		return golibvirt.DomainNostate, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("look up domain %s: %w", name, err)
	}
	s, _, err := l.DomainGetState(d, 0)
	if golibvirt.IsNotFound(err) {
		return golibvirt.DomainNostate, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("state of domain %s: %w", name, err)
	}
	return golibvirt.DomainState(s), true, nil
}

// startDomain boots a defined domain; a running one is left alone.
func startDomain(l *golibvirt.Libvirt, name string) error {
	d, err := l.DomainLookupByName(name)
	if err != nil {
		return fmt.Errorf("look up domain %s: %w", name, err)
	}
	s, _, err := l.DomainGetState(d, 0)
	if err != nil {
		return fmt.Errorf("state of domain %s: %w", name, err)
	}
	if golibvirt.DomainState(s) == golibvirt.DomainRunning {
		return nil
	}
	if err := l.DomainCreate(d); err != nil {
		return fmt.Errorf("start domain %s: %w", name, err)
	}
	return nil
}

// stopDomain asks the guest to shut down (ACPI) and waits up to grace
// for it to stop, then pulls the plug. A stopped or missing domain is
// left alone.
func stopDomain(ctx context.Context, l *golibvirt.Libvirt, name string, grace time.Duration) error {
	state, found, err := domainState(l, name)
	if err != nil || !found || state == golibvirt.DomainShutoff {
		return err
	}
	d, err := l.DomainLookupByName(name)
	if err != nil {
		return fmt.Errorf("look up domain %s: %w", name, err)
	}
	if err := l.DomainShutdown(d); err != nil && !isCode(err, golibvirt.ErrOperationInvalid) {
		return fmt.Errorf("shut down domain %s: %w", name, err)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if state, found, err := domainState(l, name); err != nil || !found || state == golibvirt.DomainShutoff {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	if err := l.DomainDestroy(d); err != nil && !isCode(err, golibvirt.ErrOperationInvalid) && !golibvirt.IsNotFound(err) {
		return fmt.Errorf("power off domain %s: %w", name, err)
	}
	return nil
}

// removeDomain powers a domain off and undefines it with its UEFI
// variables; a missing domain is not an error.
func removeDomain(l *golibvirt.Libvirt, name string) error {
	d, err := l.DomainLookupByName(name)
	if golibvirt.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up domain %s: %w", name, err)
	}
	if s, _, err := l.DomainGetState(d, 0); err == nil && golibvirt.DomainState(s) != golibvirt.DomainShutoff {
		if err := l.DomainDestroy(d); err != nil && !isCode(err, golibvirt.ErrOperationInvalid) && !golibvirt.IsNotFound(err) {
			return fmt.Errorf("power off domain %s: %w", name, err)
		}
	}
	err = l.DomainUndefineFlags(d, golibvirt.DomainUndefineNvram)
	if isCode(err, golibvirt.ErrInvalidArg) {
		// Drivers without UEFI variables (libvirt's test driver) refuse
		// the flag.
		err = l.DomainUndefineFlags(d, 0)
	}
	if err != nil && !golibvirt.IsNotFound(err) {
		return fmt.Errorf("undefine domain %s: %w", name, err)
	}
	return nil
}
