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
