#!/usr/bin/env bash
# Runs Docker Engine 28.5.2 with its containerd image store *beside* the
# engine that answers now, for `make e2e-store` and for measuring
# `make bench-load` against that store (the default of Docker Desktop's
# new installs and of Docker Engine 29; Debian ships only 20.10, which
# has the classic store alone).
#
#   hack/dockerd-store.sh start        build it (once) and start it
#   hack/dockerd-store.sh exec CMD...  run CMD against it, from the
#                                      current directory (see below)
#   hack/dockerd-store.sh stop         stop it and remove its namespace
#
# It shares nothing with the system's engine, which keeps running with
# its containers: its own data root, exec root, socket, pid file,
# containerd namespaces (should it find the system's containerd) and
# network namespace (hwk-store). The namespace is what lets both engines
# keep their iptables rules: in one namespace they would fight over
# Docker's chains (each flushes DOCKER when it starts), and an engine
# without rules leaves its bridges' traffic to the FORWARD policy the
# other sets to DROP. `exec` runs CMD in that namespace with DOCKER_HOST
# set to the engine's socket; the namespace has no route out, so build
# or download what CMD needs before. Only the engine this script started
# is stopped, by the pid it wrote, never a process found by name. A
# second `start` while one runs is refused.
#
# The engine is built from the Go module proxy, the only source this
# machine reaches. Moby has no go.mod at this version: its vendor.mod is
# one in all but name, and module zips carry no vendor directory, so the
# build uses vendor.mod as go.mod with the versions it pins. Needs root;
# containerd and runc come from the system's docker.io.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
. hack/lib/pidfile.sh

version=v28.5.2
tools=${HWK_TOOLS:-$PWD/bin/tools}
dir=$tools/dockerd-$version
# HWK_DOCKERD_STORE_ROOT moves its data root (make ci-cold starts it empty).
state=${HWK_DOCKERD_STORE_ROOT:-/var/lib/hwk-docker-store}
run=/run/hwk-docker-store
netns=hwk-store
pidfile=$run/docker.pid
sock=$run/docker.sock
log=/tmp/hwk-dockerd-store.log

build() {
	[ -x "$dir/dockerd" ] && [ -x "$dir/docker-proxy" ] && return
	echo "building dockerd $version from the Go module proxy (a few minutes, once)"
	local src work
	src=$(go mod download -json "github.com/docker/docker@$version+incompatible" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -d "$src" ] || { echo "go mod download gave no directory for github.com/docker/docker@$version" >&2; exit 1; }
	work=$(mktemp -d)
	trap 'rm -rf "$work"; trap - RETURN' RETURN
	cp -r "$src/." "$work"
	chmod -R u+w "$work"
	rm -rf "$work/vendor"
	cp "$work/vendor.mod" "$work/go.mod"
	cp "$work/vendor.sum" "$work/go.sum"
	mkdir -p "$dir"
	(cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -o "$dir/" \
		-ldflags "-X github.com/docker/docker/dockerversion.Version=${version#v} -X github.com/docker/docker/dockerversion.GitCommit=module-proxy" \
		./cmd/dockerd ./cmd/docker-proxy)
}

# ours prints the pid of the engine this script started, if it still runs.
ours() { pid_ours "$pidfile" "$dir/dockerd"; }

in_ns() {
	DOCKER_HOST=unix://$sock nsenter --net="/run/netns/$netns" "$@"
}

start() {
	build
	mkdir -p "$run"
	# One start at a time; a second run finds the first's engine.
	exec 9>"$run/start.lock"
	flock -n 9 || { echo "another hack/dockerd-store.sh start is running" >&2; exit 1; }
	if pid=$(ours); then
		echo "the containerd-store engine of hack/dockerd-store.sh already runs (pid $pid), for another run: wait for it to finish, or stop it with: hack/dockerd-store.sh stop" >&2
		exit 1
	fi
	[ -e "/run/netns/$netns" ] || ip netns add "$netns"
	ip netns exec "$netns" ip link set lo up
	cat >"$run/daemon.json" <<EOF
{"features": {"containerd-snapshotter": true}, "data-root": "$state", "exec-root": "$run/exec", "pidfile": "$pidfile", "hosts": ["unix://$sock"],
 "containerd-namespace": "hwk-store", "containerd-plugins-namespace": "hwk-store-plugins"}
EOF
	# dockerd looks for docker-proxy (published ports) on PATH; it must be
	# its own version's. nsenter enters only the network namespace: the
	# engine sees the host's cgroups and mounts.
	PATH="$dir:$PATH" nohup nsenter --net="/run/netns/$netns" "$dir/dockerd" --config-file "$run/daemon.json" >"$log" 2>&1 9>&- &
	# nsenter execs dockerd, so this is the engine's own pid.
	started=$!
	for _ in $(seq 60); do
		in_ns docker version >/dev/null 2>&1 && break
		sleep 1
	done
	if ! in_ns docker version >/dev/null 2>&1; then
		tail -20 "$log" >&2
		echo "the engine did not answer in 60 s; stopping it (pid $started)" >&2
		kill -TERM "$started" 2>/dev/null || true
		wait "$started" 2>/dev/null || true
		ip netns delete "$netns"
		exit 1
	fi
	status=$(in_ns docker info -f '{{.DriverStatus}}')
	case $status in
	*io.containerd.snapshotter*) ;;
	*)
		echo "the engine started without the containerd image store: $status" >&2
		stop
		exit 1
		;;
	esac
	in_ns docker version -f 'Docker Engine {{.Server.Version}} (API {{.Server.APIVersion}}), containerd image store, at unix://'"$sock"' in network namespace '"$netns"'; log: '"$log"
}

stop() {
	local pid
	if pid=$(ours); then
		pid_stop "$pid" dockerd
		echo "stopped the containerd-store engine (pid $pid)"
	fi
	rm -f "$pidfile"
	[ ! -e "/run/netns/$netns" ] || ip netns delete "$netns"
}

case ${1:-} in
start) start ;;
stop) stop ;;
exec)
	shift
	[ $# -gt 0 ] || { echo "usage: $0 exec CMD [ARG...]" >&2; exit 2; }
	ours >/dev/null || { echo "the containerd-store engine is not running: start it with: hack/dockerd-store.sh start" >&2; exit 1; }
	cd "$caller"
	in_ns "$@"
	;;
*)
	echo "usage: $0 start|exec CMD...|stop" >&2
	exit 2
	;;
esac
