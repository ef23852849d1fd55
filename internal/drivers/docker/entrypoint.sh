#!/bin/sh
# hwk's entrypoint for node containers, copied in by the docker driver
# before the container first starts. It runs before the node's init and
# does only what a container needs and a VM does not.
set -eu

# Each node runs in a cgroup namespace of its own, so its kubelet's
# /kubepods is the node's own subtree and two nodes never share one. Docker
# mounts that namespace's cgroup hierarchy read-only unless the container is
# privileged; make it writable for systemd, containerd and the kubelet. A
# bind remount changes this mount only, never the host's hierarchy.
while read -r _ mp fstype _ _; do
	case "$fstype" in
	cgroup | cgroup2) mount -o remount,bind,rw "$mp" ;;
	esac
done </proc/self/mounts

# cgroup v2: a cgroup that holds processes cannot delegate controllers, so
# move ourselves into a leaf first and enable every controller below the
# namespace root (what systemd and the kubelet expect to find).
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	mkdir -p /sys/fs/cgroup/init.scope
	for pid in $(cat /sys/fs/cgroup/cgroup.procs); do
		echo "$pid" >/sys/fs/cgroup/init.scope/cgroup.procs 2>/dev/null || true
	done
	for c in $(cat /sys/fs/cgroup/cgroup.controllers); do
		echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
	done
fi

# Pods that mount host paths with Bidirectional propagation (Calico's node
# does, for /sys/fs and /var/run/calico) need the node's mounts to be
# shared, as they are on a VM's root; a container's root is private.
mount --make-rshared /

# On a user-defined network Docker's DNS server answers on 127.0.0.11,
# through NAT rules it puts in the container's OUTPUT chain. Pods cannot
# reach a loopback address of the node: CoreDNS, handed the node's
# resolv.conf, would forward to its own 127.0.0.11 and stop on a loop.
# Serve the same DNS on the node's address, for the node and for traffic
# routed in from pods, and make that the node's nameserver.
# The node restarts with the engine: Docker 20.10 writes a fresh
# resolv.conf at each start, an engine that kept ours would leave the
# node's address in it; either way the NAT rules are new and go in again.
embedded=127.0.0.11
node_ip=$(ip -4 -o addr show scope global | awk '{ split($4, a, "/"); print a[1]; exit }')
# The engine writes those rules with its own iptables, nf_tables or
# legacy (Docker Desktop's VM is not this host): read them with each
# and add ours with the one that has them, as kind's entrypoint picks
# its iptables mode. With no rule found resolv.conf stays as it is.
if [ -n "$node_ip" ] && grep -Eq "^nameserver ($embedded|$node_ip)\$" /etc/resolv.conf; then
	# Packets from pods come in on another interface and must be
	# allowed to reach a loopback address.
	echo 1 >/proc/sys/net/ipv4/conf/all/route_localnet || true
	added=0
	for mode in nft legacy; do
		command -v "iptables-$mode-save" >/dev/null || continue
		rules=$("iptables-$mode-save" -t nat 2>/dev/null | grep -- "-A DOCKER_OUTPUT -d $embedded/32" || true)
		[ -n "$rules" ] || continue
		while read -r _ _ _ _ _ proto _ _ _ dport _ _ _ to; do
			for chain in OUTPUT PREROUTING; do
				"iptables-$mode" -t nat -A "$chain" -d "$node_ip/32" -p "$proto" --dport "$dport" -j DNAT --to-destination "$to"
			done
			added=$((added + 1))
		done <<RULES
$rules
RULES
		break
	done
	if [ "$added" -gt 0 ]; then
		sed "s/^nameserver $embedded\$/nameserver $node_ip/" /etc/resolv.conf >/tmp/resolv.conf
		# resolv.conf is a bind mount: rewrite it in place.
		cat /tmp/resolv.conf >/etc/resolv.conf
		rm -f /tmp/resolv.conf
	else
		echo "hwk: found none of Docker's DNS rules with iptables-nft-save or iptables-legacy-save; the node keeps $embedded" >&2
	fi
fi

exec "$@"
