#!/bin/sh
# userland.sh ROOT
# Trims a debootstrapped Debian root into the base of the images that need a
# userland: kube-proxy (iptables/nftables, conntrack, ipset) and calico-node
# (also runit to supervise felix, iproute2). Runs on the build host after
# debootstrap; hwk caches the result.
set -eu
root=$1
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin \
	"$root"/var/log/*.log "$root"/usr/share/man/* "$root"/usr/share/info/* \
	"$root"/tmp/* "$root"/var/tmp/*
find "$root"/usr/share/doc -type f ! -name copyright -delete
find "$root"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias \
	-exec rm -rf {} +
