#!/bin/sh
# Makes a system libvirt answer on this machine, for the libvirt driver's
# tests: installs libvirt, QEMU and OVMF when missing and starts libvirtd
# (as a service where systemd runs, else as a daemon of its own).
set -eu

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

missing=""
command -v libvirtd >/dev/null || missing="$missing libvirt-daemon-system"
command -v qemu-system-x86_64 >/dev/null || missing="$missing qemu-system-x86"
command -v qemu-img >/dev/null || missing="$missing qemu-utils"
[ -e /usr/share/OVMF/OVMF_CODE_4M.fd ] || [ -e /usr/share/OVMF/OVMF_CODE.fd ] || missing="$missing ovmf"
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
$sudo virsh -c qemu:///system version
