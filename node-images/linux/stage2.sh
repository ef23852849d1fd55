#!/bin/sh
# stage2.sh runs once inside the node's root, in a Linux kernel (an
# unprivileged Docker container with no network), as root. hwk has
# unpacked every Debian package of debian.lock.yaml into the root as dpkg
# --unpack would (stage 1, in Go, on any host) and put under /hwk:
#   root/      hwk's files and the node's binaries, laid over the root
#   preload/   the images every node carries, as OCI archives
#   kubeadm-images.yaml, kubeadm-images   kubeadm's configuration and
#              the images it must list for it
# It configures the packages, lays hwk's files over them, runs
# configure.sh and preloads the images, then removes /hwk.
set -eu
cd /
# The same environment in every kernel (WSL gives its own LANG, TERM and
# PATH): no questions from debconf, no locale warnings from perl.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true LC_ALL=C
unset LANG TERM

# The packages' maintainer scripts: system users, alternatives
# (iptables, awk), the CA bundle, the kernel's initramfs.
dpkg --configure -a
# After dpkg, so that no conffile of hwk's is taken for a local change.
cp -a /hwk/root/. /
sh /hwk/configure.sh

# The node's kubeadm must ask for exactly the images preloaded (hwk checks
# this before building them where the host runs the node's binaries; here
# it holds on every host).
if ! listed=$(kubeadm config images list --config /hwk/kubeadm-images.yaml); then
	echo "stage2.sh: kubeadm config images list failed (its error is above)" >&2
	exit 1
fi
listed=$(echo "$listed" | sort)
if [ "$listed" != "$(sort /hwk/kubeadm-images)" ]; then
	echo "stage2.sh: kubeadm lists these images:" >&2
	echo "$listed" >&2
	echo "but the node image preloads these; update the versions in node-images/linux/components.yaml (or kubeadmTag in images/linux.yaml):" >&2
	sort /hwk/kubeadm-images >&2
	exit 1
fi

# The node's own containerd imports the images into its store. Only
# content and metadata are written (--no-unpack): containerd unpacks an
# image into the node's snapshotter the first time a container needs it.
tmp=$(mktemp -d)
sock=$tmp/containerd.sock
cat >"$tmp/config.toml" <<CONFIG
version = 3
root = "/var/lib/containerd"
state = "$tmp/state"
# Only the content and image stores are needed.
disabled_plugins = [
  "io.containerd.grpc.v1.cri",
  "io.containerd.cri.v1.images",
  "io.containerd.cri.v1.runtime",
  "io.containerd.podsandbox.controller.v1.podsandbox",
  "io.containerd.sandbox.controller.v1.shim",
  "io.containerd.nri.v1.nri",
]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[plugins.'io.containerd.internal.v1.opt']
  path = "$tmp/opt"
CONFIG
containerd --config "$tmp/config.toml" >"$tmp/log" 2>&1 &
pid=$!
n=0
until ctr --address "$sock" version >/dev/null 2>&1; do
	n=$((n + 1))
	if [ $n -gt 150 ] || ! kill -0 $pid 2>/dev/null; then
		echo "stage2.sh: containerd for preloading did not come up:" >&2
		tail -n 30 "$tmp/log" >&2
		exit 1
	fi
	sleep 0.2
done
for f in /hwk/preload/*.tar; do
	[ -e "$f" ] || continue
	ctr --address "$sock" --namespace k8s.io images import --no-unpack \
		--platform linux/amd64 "$f"
done
kill $pid
wait $pid || true
rm -rf "$tmp" /hwk
