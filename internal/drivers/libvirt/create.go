package libvirt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

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

// seed is spec's seed plus the node's identity (vmnode.AddIdentity),
// kept in the node's 0700 directory.
func (d *Driver) seed(spec drivers.MachineSpec) (drivers.MachineSpec, error) {
	if err := os.MkdirAll(d.machineFiles(spec.Ref), 0o700); err != nil {
		return spec, fmt.Errorf("node %s: %w", spec.Name, err)
	}
	return vmnode.AddIdentity(spec, d.paths(spec.Ref), &d.mu)
}

// uploadSeed writes the node's seed ISO and streams it into the pool. The
// local copy holds the node's private host key, so it lives only as long
// as the upload, in the node's 0700 directory.
func (d *Driver) uploadSeed(l *golibvirt.Libvirt, pool golibvirt.StoragePool, r drivers.Ref, files map[string][]byte) (string, error) {
	iso := filepath.Join(d.machineFiles(r), ".cidata.iso")
	defer os.Remove(iso)
	if err := vmnode.WriteSeedISO(iso, files); err != nil {
		return "", err
	}
	return uploadFile(l, pool, seedName(r), "raw", iso, nil)
}
