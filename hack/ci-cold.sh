#!/usr/bin/env bash
# make ci-cold: runs .ci/run as CI runs it on a fresh machine, without
# wiping this one. A fresh clone of HEAD, and nothing cached: its own Go
# module and build caches, hwk's cache and state (XDG dirs), npm cache
# and kubeconfig under one directory, and a Docker engine of its
# own with an empty data root. The system's engine keeps running with its
# containers and images. hwk's cache and state follow XDG_CACHE_HOME and
# XDG_DATA_HOME there (not HWK_HOME, which the e2e sets per test and
# clears to mean "the default cache").
#
# The engine is the system's dockerd binary with its own data root, exec
# root, socket, pid file and containerd namespace, in a network namespace
# of its own (hwk-ci-cold): two engines in one namespace fight over
# Docker's iptables chains. .ci/run runs in that namespace too, so that
# its tests reach the engine's bridges; a veth pair and a masquerade rule
# give the namespace the route out that the Go module proxy, Debian and
# npm need. Everything this script made is removed when it ends (the
# engine stopped by the pid it wrote, never by name); HWK_CI_COLD_KEEP=1
# keeps the directory, and HWK_CI_COLD_REUSE=1 then runs again in it
# with a fresh clone of HEAD and everything else as the kept run left it
# (the caches, the engine's images): the same run warm.
#
#   hack/ci-cold.sh           the whole run; prints .ci/run's stage table
#   hack/ci-cold.sh CMD...    CMD instead, in the clone, with the same
#                             empty caches, engine and namespace (say,
#                             make test, to measure one stage cold)
#
# libvirt: with no libvirtd answering, .ci/run starts one, here inside
# the namespace, and it is stopped at the end. A libvirtd already running
# on the host is used as it is; the namespace then reaches its NAT
# networks through the host's FORWARD chain, where libvirt's own REJECT
# may come first (not tried: none ran here).
#
# Needs root. HWK_CI_COLD_DIR (default /var/tmp/hwk-ci-cold) holds the
# clone and caches: about 30 GB at the end of a run.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib/pidfile.sh
repo=$PWD
root=${HWK_CI_COLD_DIR:-/var/tmp/hwk-ci-cold}
run=/run/hwk-ci-cold
netns=hwk-ci-cold
host_if=hwkcold0
ns_if=hwkcold1
net=10.199.254.0/30
host_ip=10.199.254.1
ns_ip=10.199.254.2
cmd=("$@")
[ ${#cmd[@]} -gt 0 ] || cmd=(.ci/run)
pidfile=$run/docker.pid
sock=$run/docker.sock
log=$run/dockerd.log

[ "$(id -u)" = 0 ] || { echo "make ci-cold needs root (a Docker engine, a network namespace, iptables)" >&2; exit 1; }
dockerd=$(command -v dockerd) || { echo "make ci-cold needs dockerd on PATH (Debian: apt-get install docker.io)" >&2; exit 1; }
[ -z "$(git status --porcelain --untracked-files=no)" ] ||
	echo "note: uncommitted changes are not in the run; it clones HEAD ($(git rev-parse --short HEAD))" >&2

mkdir -p "$run"
exec 9>"$run/lock"
flock -n 9 || { echo "another make ci-cold is running on this machine" >&2; exit 1; }

# The directory is removed only when it is this script's (its marker).
warm=
if [ -e "$root" ]; then
	[ -e "$root/.hwk-ci-cold" ] || { echo "$root exists and is not make ci-cold's (no .hwk-ci-cold in it): remove it or set HWK_CI_COLD_DIR" >&2; exit 1; }
	if [ "${HWK_CI_COLD_REUSE:-}" = 1 ]; then
		warm=1
		rm -rf "$root/src"
	else
		rm -rf "$root"
	fi
elif [ "${HWK_CI_COLD_REUSE:-}" = 1 ]; then
	echo "HWK_CI_COLD_REUSE=1 but $root is not there: run with HWK_CI_COLD_KEEP=1 first" >&2
	exit 1
fi
mkdir -p "$root"
touch "$root/.hwk-ci-cold"

# ours prints the pid of the engine this script started, if it still runs.
ours() { pid_ours "$pidfile" "$dockerd"; }

rules() {
	local op=$1
	iptables "$op" FORWARD -i "$host_if" -j ACCEPT
	iptables "$op" FORWARD -o "$host_if" -j ACCEPT
	iptables -t nat "$op" POSTROUTING -s "$net" ! -o "$host_if" -j MASQUERADE
}

cleanup() {
	local rc=$? pid
	set +e
	if pid=$(ours); then pid_stop "$pid" dockerd; fi
	rm -f "$pidfile"
	# Anything else still in the namespace was started by the run (when no
	# libvirtd answers, .ci/run starts one, and it would start here) and
	# would outlive the namespace, cut off from the host: a libvirtd left
	# so puts every later libvirt network out of the host's reach. Say
	# so, and stop it by its pid.
	if [ -e "/run/netns/$netns" ]; then
		for p in $(ip netns pids "$netns"); do
			echo "stopping pid $p, left in the namespace by the run: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" >&2
			kill -TERM "$p" 2>/dev/null
		done
	fi
	if [ -n "${rules_added:-}" ]; then rules -D 2>/dev/null; fi
	ip link delete "$host_if" 2>/dev/null
	[ ! -e "/run/netns/$netns" ] || ip netns delete "$netns"
	# The engine's data root holds mounts while it runs; it is stopped now.
	if [ "${HWK_CI_COLD_KEEP:-}" = 1 ]; then
		echo "kept $root (HWK_CI_COLD_KEEP=1)"
	else
		rm -rf "$root"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if pid=$(ours); then
	echo "make ci-cold's engine still runs (pid $pid) with no run holding it; stopping it" >&2
fi

if [ -n "$warm" ]; then
	echo "== make ci-cold, warm (HWK_CI_COLD_REUSE=1): a fresh clone of $(git rev-parse --short HEAD) in $root, the kept run's caches and engine"
else
	echo "== make ci-cold: a fresh clone of $(git rev-parse --short HEAD) in $root, empty caches, an engine of its own"
fi
git clone --quiet --no-hardlinks "$repo" "$root/src"
git -C "$root/src" checkout --quiet --detach "$(git rev-parse HEAD)"

[ ! -e "/run/netns/$netns" ] || ip netns delete "$netns"
ip netns add "$netns"
ip link delete "$host_if" 2>/dev/null || true
ip link add "$host_if" type veth peer name "$ns_if"
ip link set "$ns_if" netns "$netns"
ip addr add "$host_ip/30" dev "$host_if"
ip link set "$host_if" up
ip netns exec "$netns" ip link set lo up
ip netns exec "$netns" ip addr add "$ns_ip/30" dev "$ns_if"
ip netns exec "$netns" ip link set "$ns_if" up
ip netns exec "$netns" ip route add default via "$host_ip"
sysctl -qw net.ipv4.ip_forward=1
rules_added=1
rules -I

cat >"$run/daemon.json" <<EOF
{"data-root": "$root/docker", "exec-root": "$run/exec", "pidfile": "$pidfile", "hosts": ["unix://$sock"],
 "containerd-namespace": "hwk-ci-cold", "containerd-plugins-namespace": "hwk-ci-cold-plugins"}
EOF
# nsenter execs dockerd: the pid it writes is the engine's own.
nohup nsenter --net="/run/netns/$netns" "$dockerd" --config-file "$run/daemon.json" >"$log" 2>&1 9>&- &
for _ in $(seq 60); do
	DOCKER_HOST=unix://$sock docker version >/dev/null 2>&1 && break
	sleep 1
done
DOCKER_HOST=unix://$sock docker version --format 'engine: Docker {{.Server.Version}} at unix://'"$sock"', data root '"$root/docker"' (log: '"$log"')' ||
	{ tail -20 "$log" >&2; exit 1; }

cache=$root/cache
mkdir -p "$cache" "$root/data" "$root/kube"
# .ci/run from the clone, in the namespace, with every cache empty. The
# machine's settings (~/.config/go/env, ~/.npmrc) stay: a fresh CI
# machine has them too.
began=$(date +%s)
rc=0
(
	cd "$root/src"
	exec nsenter --net="/run/netns/$netns" env \
		DOCKER_HOST="unix://$sock" \
		GOMODCACHE="$cache/gomod" GOCACHE="$cache/gobuild" GOPATH="$cache/gopath" \
		XDG_CACHE_HOME="$cache/xdg" XDG_DATA_HOME="$root/data" npm_config_cache="$cache/npm" \
		KUBECONFIG="$root/kube/config" HWK_DOCKERD_STORE_ROOT="$root/docker-store" \
		"${cmd[@]}" 9>&-
) 2>&1 | tee "$run/ci.log" || rc=$?
echo "== make ci-cold: ${cmd[*]} exited $rc after $(($(date +%s) - began)) s (log: $run/ci.log)"
exit "$rc"
