package libvirt

import (
	"fmt"
	"io"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"
)

// The storage pool holding every hwk volume: node image bases, node
// overlays and seeds. It lives in libvirt's own images directory, which
// QEMU (running as its own user under qemu:///system) can read; a user's
// home directory, where hwk's cache is, it usually cannot.
const (
	poolName = "hwk"
	poolDir  = "/var/lib/libvirt/images/hwk"
)

// poolXML returns the hwk pool: a directory that only root and QEMU traverse.
func poolXML() (string, error) {
	p := &libvirtxml.StoragePool{
		Type: "dir",
		Name: poolName,
		Target: &libvirtxml.StoragePoolTarget{
			Path:        poolDir,
			Permissions: &libvirtxml.StoragePoolTargetPermissions{Mode: "0711"},
		},
	}
	return p.Marshal()
}

// ensurePool defines, builds and starts the hwk pool as needed.
func ensurePool(l *golibvirt.Libvirt) (golibvirt.StoragePool, error) {
	pool, err := l.StoragePoolLookupByName(poolName)
	if isCode(err, golibvirt.ErrNoStoragePool) {
		xml, err := poolXML()
		if err != nil {
			return pool, err
		}
		if pool, err = l.StoragePoolDefineXML(xml, 0); err != nil {
			return pool, fmt.Errorf("define storage pool %s: %w", poolName, err)
		}
		if err := l.StoragePoolBuild(pool, 0); err != nil {
			return pool, fmt.Errorf("build storage pool %s at %s: %w", poolName, poolDir, err)
		}
		if err := l.StoragePoolSetAutostart(pool, 1); err != nil {
			return pool, fmt.Errorf("autostart storage pool %s: %w", poolName, err)
		}
	} else if err != nil {
		return pool, fmt.Errorf("look up storage pool %s: %w", poolName, err)
	}
	active, err := l.StoragePoolIsActive(pool)
	if err != nil {
		return pool, fmt.Errorf("storage pool %s: %w", poolName, err)
	}
	if active == 0 {
		if err := l.StoragePoolCreate(pool, 0); err != nil {
			return pool, fmt.Errorf("start storage pool %s: %w", poolName, err)
		}
	}
	return pool, nil
}

// volumeXML describes a volume of format (raw or qcow2) holding capacity
// bytes, over a qcow2 backing file when backing is set.
func volumeXML(name, format string, capacity uint64, backing string) (string, error) {
	v := &libvirtxml.StorageVolume{
		Name:     name,
		Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: capacity},
		Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: format}},
	}
	if backing != "" {
		v.BackingStore = &libvirtxml.StorageVolumeBackingStore{Path: backing, Format: &libvirtxml.StorageVolumeTargetFormat{Type: "qcow2"}}
	}
	return v.Marshal()
}

// uploadVolume makes volume name from size bytes of r (a seed ISO, a node
// image's disk) and returns its path. The bytes are streamed through
// libvirt, so hwk needs no write access to the pool's directory.
func uploadVolume(l *golibvirt.Libvirt, pool golibvirt.StoragePool, name string, r io.Reader, size int64) (string, error) {
	xml, err := volumeXML(name, "raw", uint64(size), "")
	if err != nil {
		return "", err
	}
	return uploadAs(l, pool, name, xml, r, size)
}

// uploadAs runs uploadVolume on a volume xml describes.
func uploadAs(l *golibvirt.Libvirt, pool golibvirt.StoragePool, name, xml string, r io.Reader, size int64) (string, error) {
	if err := deleteVolume(l, pool, name); err != nil {
		return "", err
	}
	vol, err := l.StorageVolCreateXML(pool, xml, 0)
	if err != nil {
		return "", fmt.Errorf("create volume %s: %w", name, err)
	}
	if err := l.StorageVolUpload(vol, r, 0, uint64(size), 0); err != nil {
		_ = l.StorageVolDelete(vol, 0)
		return "", fmt.Errorf("upload volume %s: %w", name, err)
	}
	return l.StorageVolGetPath(vol)
}

// overlayVolume makes volume name, a qcow2 of capacity bytes whose
// backing file is base: the node writes only its own changes.
func overlayVolume(l *golibvirt.Libvirt, pool golibvirt.StoragePool, name, base string, capacity uint64) (string, error) {
	xml, err := volumeXML(name, "qcow2", capacity, base)
	if err != nil {
		return "", err
	}
	vol, err := l.StorageVolCreateXML(pool, xml, 0)
	if err != nil {
		return "", fmt.Errorf("create disk %s over %s: %w", name, base, err)
	}
	return l.StorageVolGetPath(vol)
}

// deleteVolume removes a volume; a missing one is not an error.
func deleteVolume(l *golibvirt.Libvirt, pool golibvirt.StoragePool, name string) error {
	vol, err := l.StorageVolLookupByName(pool, name)
	if isCode(err, golibvirt.ErrNoStorageVol) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up volume %s: %w", name, err)
	}
	if err := l.StorageVolDelete(vol, 0); err != nil && !isCode(err, golibvirt.ErrNoStorageVol) {
		return fmt.Errorf("delete volume %s: %w", name, err)
	}
	return nil
}
