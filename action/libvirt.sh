#!/usr/bin/env bash
# Makes libvirt usable by hwk on a GitHub-hosted Linux runner, for clusters
# with nodes on the libvirt driver: installs libvirt, QEMU and OVMF when
# missing, starts libvirtd, and lets the runner's user reach the system
# daemon's socket at once (a new group membership would only apply to the
# next login). KVM itself is used by QEMU, which libvirt runs as its own
# user. Never run here: hwk's CI has no KVM-capable runner (see
# site/content/docs/ci.md).
set -euo pipefail

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
missing=()
command -v libvirtd >/dev/null || missing+=(libvirt-daemon-system)
command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
command -v qemu-img >/dev/null || missing+=(qemu-utils)
[ -e /usr/share/OVMF/OVMF_CODE_4M.fd ] || [ -e /usr/share/OVMF/OVMF_CODE.fd ] || missing+=(ovmf)
command -v setfacl >/dev/null || missing+=(acl)
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing ${missing[*]}"
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
$sudo systemctl start libvirtd
for _ in $(seq 30); do
	[ -S /var/run/libvirt/libvirt-sock ] && break
	sleep 1
done
if [ -n "$sudo" ]; then
	$sudo setfacl -m "u:$(id -un):rw" /var/run/libvirt/libvirt-sock
fi
virsh -c qemu:///system version
