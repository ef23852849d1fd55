#!/bin/sh
# disk.sh ROOTFS OUT_RAW SIZE_BYTES
# Makes OUT_RAW, a bootable GPT/UEFI raw disk of SIZE_BYTES (rounded down to
# a whole MiB, sparse) from the node rootfs directory ROOTFS: an EFI system
# partition with systemd-boot, the kernel and the initramfs, then an ext4
# root partition filled from ROOTFS that takes the rest of the disk.
#
# Nothing is mounted and no loop device is used, so this runs in an
# unprivileged CI container: the tools write the file systems into files
# themselves (mtools into a FAT image copied into the disk, mkfs.ext4 -d
# copying the rootfs straight into the disk at the root partition's offset).
# ROOTFS is only read. Run it as root (or under fakeroot with the rootfs
# made under the same fakeroot): mkfs.ext4 -d copies owners and modes as it
# sees them and must be able to read every file.
#
# Environment:
#   HWK_ESP_MIB       size of the EFI system partition in MiB (default 256)
#   HWK_CMDLINE_EXTRA more kernel parameters, appended after hwk's
set -eu

usage() {
	echo "usage: disk.sh ROOTFS OUT_RAW SIZE_BYTES" >&2
	exit 2
}
die() {
	echo "disk.sh: $*" >&2
	exit 1
}

[ $# -eq 3 ] || usage
rootfs=$1 out=$2 size=$3
esp_mib=${HWK_ESP_MIB:-256}
extra=${HWK_CMDLINE_EXTRA:-}

case $size in '' | *[!0-9]*) die "SIZE_BYTES must be a number of bytes, not '$size'" ;; esac
case $esp_mib in '' | *[!0-9]*) die "HWK_ESP_MIB must be a number of MiB, not '$esp_mib'" ;; esac
[ -d "$rootfs" ] || die "rootfs $rootfs is not a directory"

# mkfs.* and sgdisk live in sbin, which a non-root user's PATH lacks.
PATH=$PATH:/usr/sbin:/sbin
missing=
need() {
	command -v "$1" >/dev/null 2>&1 || missing="$missing
  $1 (Debian/Ubuntu: apt-get install $2)"
}
need mkfs.ext4 e2fsprogs
need mkfs.fat dosfstools
need mmd mtools
need mcopy mtools
need sgdisk gdisk
need dd coreutils
need truncate coreutils
[ -z "$missing" ] || die "missing tools:$missing"

# Layout, in MiB so every partition starts 1 MiB-aligned: the primary GPT in
# the first MiB, the ESP, the root partition, and a last MiB left for the
# backup GPT (33 sectors) so the root partition's size stays whole MiB.
mib=1048576
disk_mib=$((size / mib))
esp_start=1
root_start=$((esp_start + esp_mib))
root_mib=$((disk_mib - root_start - 1))
# FAT32 needs 65525 clusters: 33 MiB at 512-byte clusters.
[ "$esp_mib" -ge 34 ] || die "HWK_ESP_MIB=$esp_mib is too small; FAT32 needs at least 34 MiB"
[ "$root_mib" -ge 64 ] || die "a disk of $size bytes leaves no room for the root file system; give at least $(((root_start + 65) * mib)) bytes"

# The kernel and initramfs: what the rootfs's /vmlinuz and /initrd.img
# symlinks name (Debian keeps them pointing at the newest kernel), else the
# newest /boot/vmlinuz-*. Symlinks are resolved inside the rootfs: an
# absolute target means ROOTFS/target, never the host's file.
resolve() {
	p=$1 n=0
	while [ -L "$rootfs$p" ]; do
		t=$(readlink "$rootfs$p")
		case $t in
		/*) p=$t ;;
		*) p=${p%/*}/$t ;;
		esac
		n=$((n + 1))
		[ $n -le 16 ] || return 0
	done
	if [ -f "$rootfs$p" ]; then echo "$rootfs$p"; fi
}
kernel=$(resolve /vmlinuz)
[ -n "$kernel" ] || kernel=$(resolve /boot/vmlinuz)
if [ -z "$kernel" ]; then
	# ls | sort -V: version order, so 6.1.0-10 comes after 6.1.0-9.
	kernel=$(ls "$rootfs"/boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1)
fi
[ -n "$kernel" ] && [ -f "$kernel" ] ||
	die "no kernel in $rootfs/boot (install linux-image-cloud-amd64 in the rootfs)"
kver=${kernel##*/vmlinuz-}
[ "$kver" != "$kernel" ] || kver=
initrd=
[ -z "$kver" ] || [ ! -f "$rootfs/boot/initrd.img-$kver" ] || initrd=$rootfs/boot/initrd.img-$kver
[ -n "$initrd" ] || initrd=$(resolve /initrd.img)
[ -n "$initrd" ] || initrd=$(resolve /boot/initrd.img)
# The kernel's storage drivers are modules, so without an initramfs it
# cannot find its root.
[ -n "$initrd" ] ||
	die "no initramfs for kernel ${kver:-$kernel} in $rootfs/boot (install initramfs-tools in the rootfs, or run update-initramfs -c -k ${kver:-VERSION} in it)"

sdboot=$rootfs/usr/lib/systemd/boot/efi/systemd-bootx64.efi
[ -f "$sdboot" ] || die "no $sdboot (install systemd-boot-efi in the rootfs)"

uuid() {
	if [ -r /proc/sys/kernel/random/uuid ]; then
		cat /proc/sys/kernel/random/uuid
	elif command -v uuidgen >/dev/null 2>&1; then
		uuidgen
	else
		die "cannot make a UUID: no /proc/sys/kernel/random/uuid and no uuidgen (Debian/Ubuntu: apt-get install uuid-runtime)"
	fi
}
# Chosen here, not by sgdisk, so the boot entry can name the root partition
# before the partition table exists. PARTUUID rather than the file system's
# UUID: the kernel resolves it itself, initramfs or not.
root_partuuid=$(uuid)

# Scratch for the ESP image, next to the output rather than in /tmp, which
# is often a small tmpfs.
outdir=$(dirname "$out")
work=$(mktemp -d "$outdir/.disk.XXXXXX")
done=
cleanup() {
	rm -rf "$work"
	# No half-built disk is left for a later step to mistake for a good one.
	[ -n "$done" ] || rm -f "$out"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The ESP. The kernel and initramfs are copied in under their versioned
# names so an entry always names the pair it was made with.
cmdline="root=PARTUUID=$root_partuuid rw console=tty0 console=ttyS0,115200"
# The last console= is /dev/console, where systemd writes its status: the
# serial port, which every hypervisor can log and hwk reads.
[ -z "$extra" ] || cmdline="$cmdline $extra"
kname=vmlinuz${kver:+-$kver}
iname=initrd.img${kver:+-$kver}
# timeout 0: straight to the only entry; holding a key still shows the menu.
printf 'default hwk.conf\ntimeout 0\neditor no\n' >"$work/loader.conf"
printf 'title hwk node%s\nlinux /%s\ninitrd /%s\noptions %s\n' \
	"${kver:+ (Linux $kver)}" "$kname" "$iname" "$cmdline" >"$work/hwk.conf"

esp=$work/esp.img
truncate -s "${esp_mib}M" "$esp"
mkfs.fat -F 32 -n HWK-ESP "$esp" >/dev/null
mmd -i "$esp" ::/EFI ::/EFI/BOOT ::/loader ::/loader/entries
# \EFI\BOOT\BOOTX64.EFI is the removable-media path every UEFI firmware
# tries when it has no boot entries of its own, as on a new VM.
mcopy -i "$esp" "$sdboot" ::/EFI/BOOT/BOOTX64.EFI
mcopy -i "$esp" "$work/loader.conf" ::/loader/loader.conf
mcopy -i "$esp" "$work/hwk.conf" ::/loader/entries/hwk.conf
{ mcopy -i "$esp" "$kernel" "::/$kname" && mcopy -i "$esp" "$initrd" "::/$iname"; } ||
	die "copying the kernel and initramfs into the ESP failed; HWK_ESP_MIB=$esp_mib may be too small"

# The disk: the partition table, the ESP copied in at its offset, then the
# root file system made in place. conv=sparse seeks over the ESP image's
# zero blocks instead of writing them; notrunc keeps the rest of the disk.
rm -f "$out"
truncate -s "${disk_mib}M" "$out"
sgdisk --clear \
	--new=1:$((esp_start * 2048)):$(((esp_start + esp_mib) * 2048 - 1)) \
	--typecode=1:EF00 --change-name=1:"EFI system partition" \
	--new=2:$((root_start * 2048)):$(((root_start + root_mib) * 2048 - 1)) \
	--typecode=2:8304 --change-name=2:hwk-root \
	--partition-guid=2:"$root_partuuid" \
	"$out" >/dev/null
dd if="$esp" of="$out" bs=1M seek="$esp_start" conv=notrunc,sparse status=none

# The root file system, at the partition's full size so the node has room
# to grow into; the disk stays sparse. It is made in place (-E offset), not
# in an image of its own copied in with dd like the ESP: dd would read the
# image's every hole back as zeros, some 20 s of a 25 s build for a 20 GiB
# disk, and the image would double the scratch space needed. Inode tables
# and the journal are zeroed now (unwritten extents, no data) rather than
# by the guest kernel's lazy init after boot, which would write hundreds of
# MiB of zeros into every node's disk.
if ! mkfs.ext4 -q -F -L hwk-root \
	-E offset=$((root_start * mib)),lazy_itable_init=0,lazy_journal_init=0 \
	-d "$rootfs" "$out" "${root_mib}M"; then
	used=$(du -sm "$rootfs" 2>/dev/null | cut -f1) || used=unknown
	die "mkfs.ext4 -d $rootfs failed (the rootfs uses $used MiB, the root partition has $root_mib MiB)"
fi
# A file system that overran its partition would show here as a broken
# backup GPT. sgdisk --verify exits 0 either way; only its report tells.
report=$(sgdisk --verify "$out" 2>&1) || true
case $report in
*"No problems found"*) ;;
*) die "the partition table of $out is damaged: $report" ;;
esac
done=1
echo "disk.sh: $out: $disk_mib MiB, kernel ${kver:-$kernel}, root=PARTUUID=$root_partuuid"
