package diskimage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
)

// sdBootPath is systemd-boot in the rootfs (Debian: systemd-boot-efi).
const sdBootPath = "usr/lib/systemd/boot/efi/systemd-bootx64.efi"

// bootFiles are what the ESP gets from the rootfs, as rootfs paths.
type bootFiles struct {
	kernel, initrd, sdboot, kver string
}

// findBoot picks the kernel and initramfs: what the rootfs's /vmlinuz and
// /initrd.img symlinks name (Debian keeps them pointing at the newest
// kernel), else the newest /boot/vmlinuz-* in version order, with the
// initrd.img of the same version.
func (idx *rootIndex) findBoot() (bootFiles, error) {
	var b bootFiles
	for _, p := range []string{"vmlinuz", "boot/vmlinuz"} {
		if k, ok := idx.resolve(p); ok {
			b.kernel = k
			break
		}
	}
	if b.kernel == "" {
		for p, n := range idx.nodes {
			dir, name := path.Split(p)
			if dir != "boot/" || !strings.HasPrefix(name, "vmlinuz-") || n.kind == kindDir {
				continue
			}
			if _, ok := idx.resolve(p); !ok {
				continue
			}
			// Name the version of the link, as ls | sort -V does, but
			// copy what it resolves to; the version comes from that.
			if b.kernel == "" || versionLess(path.Base(b.kernel), name) {
				b.kernel = p
			}
		}
		if b.kernel != "" {
			b.kernel, _ = idx.resolve(b.kernel)
		}
	}
	if b.kernel == "" {
		return b, fmt.Errorf("no kernel in the rootfs's /boot (install linux-image-cloud-amd64 in the rootfs)")
	}
	if v, ok := strings.CutPrefix(path.Base(b.kernel), "vmlinuz-"); ok {
		b.kver = v
	}
	if b.kver != "" {
		if i, ok := idx.resolve("boot/initrd.img-" + b.kver); ok {
			b.initrd = i
		}
	}
	for _, p := range []string{"initrd.img", "boot/initrd.img"} {
		if b.initrd != "" {
			break
		}
		if i, ok := idx.resolve(p); ok {
			b.initrd = i
		}
	}
	// The kernel's storage drivers are modules, so without an initramfs
	// it cannot find its root.
	if b.initrd == "" {
		v := b.kver
		if v == "" {
			v = "VERSION"
		}
		return b, fmt.Errorf("no initramfs for kernel /%s in the rootfs's /boot (install initramfs-tools in the rootfs, or run update-initramfs -c -k %s in it)", b.kernel, v)
	}
	sd, ok := idx.resolve(sdBootPath)
	if !ok {
		return b, fmt.Errorf("no /%s in the rootfs (install systemd-boot-efi in the rootfs)", sdBootPath)
	}
	b.sdboot = sd
	return b, nil
}

// writeESP makes the FAT32 EFI system partition of size bytes at start in
// disk: systemd-boot at the removable-media path, its loader.conf and
// hwk's entry, and the kernel and initramfs copied from the root file
// system under their versioned names, so an entry always names the pair
// it was made with.
func writeESP(disk backend.Storage, start, size int64, idx *rootIndex, entry bootEntry, res *RawDisk) error {
	b, err := idx.findBoot()
	if err != nil {
		return err
	}
	res.Kernel, res.Initrd, res.KernelVersion = "/"+b.kernel, "/"+b.initrd, b.kver
	esp, err := fat32.Create(disk, size, start, 512, espLabel, false)
	if err != nil {
		return fmt.Errorf("make the FAT32 file system: %w", err)
	}
	for _, d := range []string{"/EFI", "/EFI/BOOT", "/loader", "/loader/entries"} {
		if err := esp.Mkdir(d); err != nil {
			return fmt.Errorf("make %s: %w", d, err)
		}
	}
	topDirs, err := rootChildDirs(disk, start, esp)
	if err != nil {
		return err
	}
	kname, iname, title := "vmlinuz", "initrd.img", "hwk node"
	if b.kver != "" {
		kname += "-" + b.kver
		iname += "-" + b.kver
		title += " (Linux " + b.kver + ")"
	}
	// timeout 0: straight to the only entry; holding a key still shows
	// the menu.
	loaderConf := "default hwk.conf\ntimeout 0\neditor no\n"
	hwkConf := fmt.Sprintf("title %s\nlinux /%s\ninitrd /%s\noptions %s\n", title, kname, iname, entry.cmdline())
	files := []struct {
		dst, src string
		data     []byte
	}{
		// \EFI\BOOT\BOOTX64.EFI is the removable-media path every UEFI
		// firmware tries when it has no boot entries of its own, as on a
		// new VM.
		{dst: "/EFI/BOOT/BOOTX64.EFI", src: b.sdboot},
		{dst: "/loader/loader.conf", data: []byte(loaderConf)},
		{dst: "/loader/entries/hwk.conf", data: []byte(hwkConf)},
		{dst: "/" + kname, src: b.kernel},
		{dst: "/" + iname, src: b.initrd},
	}
	for _, f := range files {
		data := f.data
		if f.src != "" {
			if data, err = idx.readFile(f.src); err != nil {
				return err
			}
		}
		if err := writeFAT(esp, f.dst, data); err != nil {
			return fmt.Errorf("%w (the ESP has %d MiB; a larger one may be needed)", err, size/mibBytes)
		}
	}
	// Last: go-diskfs writes a directory's entries again, ".." included,
	// each time it adds one.
	return fixDotDot(disk, topDirs)
}

// The 8.3 names of a directory's first two entries.
var (
	dotName    = []byte(".          ")
	dotDotName = []byte("..         ")
)

// dirEntryCluster reads the first cluster of a 32-byte FAT directory entry.
func dirEntryCluster(e []byte) uint32 {
	return uint32(binary.LittleEndian.Uint16(e[20:22]))<<16 | uint32(binary.LittleEndian.Uint16(e[26:28]))
}

// rootChildDirs finds the directories made in the ESP's root directory:
// those whose ".." entry names cluster 2, the FAT32 root's. go-diskfs
// writes that, where the FAT specification (and fsck.fat) want 0 for the
// root. They are among the first clusters, allocated before any file. It
// returns the disk offsets of their ".." entries.
func rootChildDirs(disk backend.Storage, start int64, esp *fat32.FileSystem) ([]int64, error) {
	bpc := int64(esp.BytesPerCluster())
	entries := make([]byte, 64)
	var found []int64
	for c := uint32(3); c < 3+32; c++ {
		off := start + int64(esp.DataStart()) + int64(c-2)*bpc
		if _, err := disk.ReadAt(entries, off); err != nil {
			return nil, fmt.Errorf("read the ESP's directories: %w", err)
		}
		dot, dotDot := entries[:32], entries[32:]
		if bytes.Equal(dot[:11], dotName) && dot[11]&0x10 != 0 && dirEntryCluster(dot) == c &&
			bytes.Equal(dotDot[:11], dotDotName) && dotDot[11]&0x10 != 0 && dirEntryCluster(dotDot) == 2 {
			found = append(found, off+32)
		}
	}
	return found, nil
}

// fixDotDot makes each ".." entry at offsets name the root as cluster 0.
func fixDotDot(disk backend.Storage, offsets []int64) error {
	w, err := disk.Writable()
	if err != nil {
		return err
	}
	e := make([]byte, 32)
	for _, off := range offsets {
		if _, err := disk.ReadAt(e, off); err != nil {
			return fmt.Errorf("read the ESP's directories: %w", err)
		}
		if !bytes.Equal(e[:11], dotDotName) || dirEntryCluster(e) != 2 {
			return fmt.Errorf("the ESP's directory entry at %d is not the \"..\" it was", off)
		}
		clear(e[20:22])
		clear(e[26:28])
		if _, err := w.WriteAt(e, off); err != nil {
			return fmt.Errorf("write the ESP's directories: %w", err)
		}
	}
	return nil
}

// readFile returns a whole file of the root file system, for one Write to
// the ESP.
func (idx *rootIndex) readFile(p string) ([]byte, error) {
	// Why whole: go-diskfs's FAT writer rewrites both FATs on each Write
	// (2 MiB each for a 256 MiB ESP), so each ESP file takes one Write.
	f, err := idx.fs.OpenFile(p, os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("read /%s back from the root file system: %w", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read /%s back from the root file system: %w", p, err)
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("read /%s back from the root file system: %w", p, err)
	}
	return data, nil
}

func writeFAT(esp *fat32.FileSystem, p string, data []byte) error {
	f, err := esp.OpenFile(p, os.O_CREATE|os.O_RDWR)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	defer f.Close()
	if n, err := f.Write(data); err != nil || n != len(data) {
		return fmt.Errorf("write %s (%d bytes, wrote %d): %v", p, len(data), n, err)
	}
	return nil
}

// versionLess orders names as sort -V does for kernel names: runs of
// digits compare as numbers, the rest byte by byte, so 6.1.0-10 comes
// after 6.1.0-9.
func versionLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := isDigit(a[0]), isDigit(b[0])
		if da && db {
			na, ra := digitRun(a)
			nb, rb := digitRun(b)
			na, nb = strings.TrimLeft(na, "0"), strings.TrimLeft(nb, "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			// Where one name has a digit and the other not, the one
			// whose non-digit part ended sorts first, as in sort -V.
			if da != db {
				return da
			}
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitRun(s string) (run, rest string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}
