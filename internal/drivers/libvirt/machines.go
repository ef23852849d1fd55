package libvirt

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

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
		if err := os.RemoveAll(d.machineFiles(r)); err != nil {
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

// HostEndpoint implements drivers.Driver: the host is on the cluster's
// network, so it reaches the node at its own address.
func (d *Driver) HostEndpoint(ctx context.Context, r drivers.Ref, port uint16) (netip.AddrPort, error) {
	return drivers.OwnAddress(ctx, d, r, port, "libvirt domain")
}

// Node implements drivers.Driver: SSH to the node's address with the
// cluster's key, accepting only the host key hwk made for the node. A
// Linux node asks DHCP for its address, so its lease must show the
// reserved address first.
func (d *Driver) Node(_ context.Context, r drivers.Ref) (*node.Node, error) {
	return withConn(d, func(l *golibvirt.Libvirt) (*node.Node, error) {
		m, err := inspect(l, r.Name)
		if err != nil {
			return nil, err
		}
		switch {
		case m.State == drivers.StateMissing || m.Cluster != r.Cluster:
			return nil, fmt.Errorf("node %s of cluster %s has no libvirt domain", r.Name, r.Cluster)
		case m.State != drivers.StateRunning:
			return nil, fmt.Errorf("node %s is %s, not running; start it with `hwk start --name %s`", r.Name, m.Detail, r.Cluster)
		}
		if m.OS == config.Linux {
			if err := confirmLease(l, r, m.IP, d.ConsoleLog(r)); err != nil {
				return nil, err
			}
		}
		return vmnode.Handle(r.Name, m.OS, m.IP, d.paths(r))
	})
}

// domainMeta reads hwk's metadata of the named domain. found says whether
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

// listMachines is every domain hwk made for cluster.
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
