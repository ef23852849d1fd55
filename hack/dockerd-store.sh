#!/usr/bin/env bash
# Runs Docker Engine 28.5.2 with its containerd image store in place of
# the engine that answers now, for `make e2e-store` and for measuring
# `make bench-load` against that store (the default of Docker Desktop's
# new installs and of Docker Engine 29; Debian ships only 20.10, which
# has the classic store alone).
#
#   hack/dockerd-store.sh start   build it (once), stop the running
#                                 dockerd, start this one
#   hack/dockerd-store.sh stop    stop it and start the system's dockerd
#
# The engine is built from the Go module proxy, the only source this
# machine reaches. Moby has no go.mod at this version: its vendor.mod is
# one in all but name, and module zips carry no vendor directory, so the
# build uses vendor.mod as go.mod with the versions it pins. It keeps its
# own data and state directories, so the stopped engine's images and
# containers are untouched. Needs root; containerd and runc come from the
# system's docker.io.
set -euo pipefail
cd "$(dirname "$0")/.."

version=v28.5.2
tools=${HWK_TOOLS:-$PWD/bin/tools}
dir=$tools/dockerd-$version
state=/var/lib/hwk-docker-store
run=/var/run/hwk-docker-store
log=/tmp/hwk-dockerd-store.log

build() {
	[ -x "$dir/dockerd" ] && [ -x "$dir/docker-proxy" ] && return
	echo "building dockerd $version from the Go module proxy (a few minutes, once)"
	local src work
	src=$(go mod download -json "github.com/docker/docker@$version+incompatible" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -d "$src" ] || { echo "go mod download gave no directory for github.com/docker/docker@$version" >&2; exit 1; }
	work=$(mktemp -d)
	trap 'rm -rf "$work"' RETURN
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

# stop_engines stops every dockerd and waits until none runs, so that the
# next one can take the socket.
stop_engines() {
	pkill -x dockerd || true
	for _ in $(seq 60); do
		pgrep -x dockerd >/dev/null || return 0
		sleep 1
	done
	echo "dockerd did not stop" >&2
	exit 1
}

wait_engine() {
	for _ in $(seq 60); do
		docker version >/dev/null 2>&1 && return 0
		sleep 1
	done
	tail -20 "$1" >&2
	exit 1
}

case ${1:-} in
start)
	build
	stop_engines
	mkdir -p "$run"
	cat >"$run/daemon.json" <<EOF
{"features": {"containerd-snapshotter": true}, "data-root": "$state", "exec-root": "$run/exec", "pidfile": "$run/docker.pid"}
EOF
	# dockerd looks for docker-proxy (published ports) on PATH; it must be
	# its own version's.
	PATH="$dir:$PATH" nohup "$dir/dockerd" --config-file "$run/daemon.json" >"$log" 2>&1 &
	wait_engine "$log"
	status=$(docker info -f '{{.DriverStatus}}')
	case $status in
	*io.containerd.snapshotter*) ;;
	*) echo "the engine started without the containerd image store: $status" >&2; exit 1 ;;
	esac
	docker version -f 'Docker Engine {{.Server.Version}} (API {{.Server.APIVersion}}), containerd image store; log: '"$log"
	;;
stop)
	stop_engines
	nohup dockerd >/tmp/hwk-ci-dockerd.log 2>&1 &
	wait_engine /tmp/hwk-ci-dockerd.log
	docker version -f 'back to Docker Engine {{.Server.Version}} (API {{.Server.APIVersion}})'
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
