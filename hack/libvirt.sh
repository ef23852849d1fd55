#!/bin/sh
# Makes a system libvirt answer on this machine, for the libvirt driver's
# tests: installs libvirt, QEMU and OVMF (and the node image build's tools)
# when missing and starts libvirtd
# and virtlogd (as services where systemd runs, else as daemons of their
# own).
set -eu

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

missing=""
command -v libvirtd >/dev/null || missing="$missing libvirt-daemon-system"
command -v qemu-system-x86_64 >/dev/null || missing="$missing qemu-system-x86"
command -v qemu-img >/dev/null || missing="$missing qemu-utils"
[ -e /usr/share/OVMF/OVMF_CODE_4M.fd ] || [ -e /usr/share/OVMF/OVMF_CODE.fd ] || missing="$missing ovmf"
# The disk tests' oracles (mtools, dosfstools, gdisk, e2fsprogs read back
# what hwk writes in Go), runc with seccomp.
command -v mcopy >/dev/null || missing="$missing mtools"
command -v mkfs.fat >/dev/null || missing="$missing dosfstools"
command -v sgdisk >/dev/null || missing="$missing gdisk"
command -v mkfs.ext4 >/dev/null || missing="$missing e2fsprogs"
[ -e /usr/include/seccomp.h ] || missing="$missing libseccomp-dev"
command -v gcc >/dev/null || missing="$missing gcc libc6-dev"
if [ -n "$missing" ]; then
	echo "installing:$missing"
	$sudo apt-get update -qq
	# shellcheck disable=SC2086
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

if ! $sudo virsh -c qemu:///system version >/dev/null 2>&1; then
	echo "starting libvirtd"
	if ! $sudo systemctl start libvirtd 2>/dev/null; then
		$sudo libvirtd -d
	fi
	for _ in $(seq 30); do $sudo virsh -c qemu:///system version >/dev/null 2>&1 && break; sleep 1; done
fi
# virtlogd writes the guests' console logs; systemd starts it on demand
# through its socket, elsewhere it must run already. A socket file alone
# proves nothing: a daemon that died (or a machine image taken while one
# ran) leaves it behind, and QEMU then fails with "Connection refused".
# virt-admin connecting to its admin socket is the proof it answers.
if ! $sudo virt-admin -c virtlogd:///system version >/dev/null 2>&1; then
	echo "starting virtlogd"
	if ! $sudo systemctl start virtlogd 2>/dev/null; then
		$sudo rm -f /run/libvirt/virtlogd-sock /run/libvirt/virtlogd-admin-sock
		$sudo virtlogd -d
	fi
	for _ in $(seq 10); do $sudo virt-admin -c virtlogd:///system version >/dev/null 2>&1 && break; sleep 1; done
	$sudo virt-admin -c virtlogd:///system version >/dev/null
fi
$sudo virsh -c qemu:///system version
