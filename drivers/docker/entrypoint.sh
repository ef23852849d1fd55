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

exec "$@"
