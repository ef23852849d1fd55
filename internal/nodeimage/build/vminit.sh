#!/bin/sh
# vminit.sh is PID 1 of the VM a root's second stage runs in when the
# host has neither Docker nor WSL 2 (VMKernel): the hypervisor starts the
# Debian cloud kernel directly, with init=/bin/sh and this file, on two
# NVMe disks (the one disk controller that kernel has built in, so no
# initramfs is needed): the stage-1 root, and an empty disk with the
# serial hwk-out. It runs stage2.sh as the other kernels do, then writes
# to hwk-out:
#   byte 0        one line: hwk-stage2 exit=N log=BYTES tar=BYTES
#   byte 4096     the script's output (its last 60 MiB)
#   byte 64 MiB   the root the script left, as a tar
# and powers the VM off. The host reads hwk-out once the VM is off.
# Nothing here may exit: PID 1 exiting is a kernel panic, which the
# kernel command line (panic=-1) and the domain turn into a stopped VM
# with no result, the host's sign that this file failed.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
cd /
# What a container gets from its runtime: /proc, /sys, a /dev with the
# kernel's devices, /dev/pts and /dev/shm, and a host name (the kernel's
# is "(none)", which kubeadm refuses as a node name).
# mount(8) keeps its table in /run/mount, on the root here (a runtime
# has /run elsewhere): what this file made there goes before the export.
[ -e /run/mount ] && runmount=1 || runmount=0
mkdir -p /proc /sys /dev
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
echo node >/proc/sys/kernel/hostname
# The logs live outside the root, which is exported.
mkdir -p /dev/shm/hwk
log=/dev/shm/hwk/stage2.log

# hwk-out by its serial: NVMe controllers are probed in no fixed order.
out=""
for c in /sys/class/nvme/nvme*; do
	if [ "$(tr -d ' ' <"$c/serial" 2>/dev/null)" = hwk-out ]; then
		out=/dev/$(basename "$c")n1
	fi
done

off() {
	sync
	echo o >/proc/sysrq-trigger
	sleep 60
}
if [ -z "$out" ] || [ ! -b "$out" ]; then
	echo "vminit.sh: no disk with the serial hwk-out" >/dev/console
	off
fi

{
	sh /hwk/stage2.sh
	echo $? >/dev/shm/hwk/rc
} 2>&1 | tee "$log" >/dev/console
rc=$(cat /dev/shm/hwk/rc 2>/dev/null || echo 255)

tarbytes=0
if [ "$rc" = 0 ]; then
	# The root as the other kernels export it: a bind mount of / shows
	# the root's own /proc, /sys and /dev (empty directories) instead of
	# what is mounted there, and nothing of this file is left.
	mkdir -p /dev/shm/hwk/root
	mount --bind / /dev/shm/hwk/root
	[ "$runmount" = 1 ] || rm -rf /run/mount
	{
		tar --create --file=- --numeric-owner --xattrs --xattrs-include='*' \
			--directory=/dev/shm/hwk/root "--exclude=./$(basename "$0")" . \
			2>/dev/shm/hwk/tar.err
		echo $? >/dev/shm/hwk/tar.rc
	} | dd of="$out" bs=1M seek=64 iflag=fullblock conv=fsync 2>/dev/shm/hwk/dd.log
	trc=$(cat /dev/shm/hwk/tar.rc 2>/dev/null || echo 255)
	tarbytes=$(sed -n 's/^\([0-9][0-9]*\) bytes.*/\1/p' /dev/shm/hwk/dd.log)
	if [ "$trc" != 0 ] || [ -z "$tarbytes" ]; then
		echo "vminit.sh: writing the root to $out failed (tar $trc):" | tee -a "$log" >/dev/console
		cat /dev/shm/hwk/tar.err /dev/shm/hwk/dd.log | tee -a "$log" >/dev/console
		rc=254
		tarbytes=0
	fi
fi

tail -c $((60 << 20)) "$log" >/dev/shm/hwk/log.tail
logbytes=$(wc -c </dev/shm/hwk/log.tail)
dd if=/dev/shm/hwk/log.tail of="$out" bs=4096 seek=1 conv=notrunc,fsync 2>/dev/null
printf 'hwk-stage2 exit=%s log=%s tar=%s\n' "$rc" "$logbytes" "$tarbytes" |
	dd of="$out" conv=notrunc,fsync 2>/dev/null
off
