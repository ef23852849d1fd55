#!/bin/sh
# userland.sh runs once inside the userland's root, in a Linux kernel (an
# unprivileged Docker container with no network), as root, after hwk has
# unpacked every Debian package of userland.lock.yaml into it as dpkg
# --unpack would. The root is the base of the images that need a
# userland: kube-proxy (iptables/nftables, conntrack, ipset) and
# calico-node (also runit to supervise felix, iproute2).
set -eu
cd /
# The same environment in every kernel (WSL gives its own LANG, TERM and
# PATH): no questions from debconf, no locale warnings from perl.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true LC_ALL=C
unset LANG TERM
dpkg --configure -a
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/*.log \
	/usr/share/man/* /usr/share/info/* /tmp/* /var/tmp/* /hwk
find /usr/share/doc -type f ! -name copyright -delete
find /usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias \
	-exec rm -rf {} +
# Files nothing in the images reads, about 2,000 of the root's 5,000: a
# node unpacks this layer when kube-proxy or calico-node first starts,
# and making files is most of an unpack's time (and of the kernel memory
# it leaves charged to the node). Time zones (the images' programs then
# keep time in UTC, as they do with tzdata's default), dpkg's per-package
# file lists, checksums and scripts (nothing installs packages in a
# running container), shell completions and lintian overrides.
rm -rf /usr/share/zoneinfo /etc/localtime /etc/timezone \
	/usr/share/bash-completion /usr/share/lintian
find /var/lib/dpkg/info -mindepth 1 -delete
