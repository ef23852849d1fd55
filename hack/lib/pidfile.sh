# shellcheck shell=bash
# Sourced by the scripts that start a daemon of their own (dockerd-store.sh,
# ci-cold.sh): they stop only that daemon, by the pid it wrote, never a
# process found by name.

# pid_ours PIDFILE EXE prints the pid in PIDFILE if that process still
# runs EXE: a pid the kernel gave to something else since is not ours.
pid_ours() {
	local pid exe
	[ -s "$1" ] || return 1
	pid=$(cat "$1")
	exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
	[ "$exe" = "$(realpath "$2")" ] || return 1
	echo "$pid"
}

# pid_stop PID NAME sends SIGTERM, waits up to 60 s, then SIGKILL.
pid_stop() {
	kill -TERM "$1" 2>/dev/null || return 0
	for _ in $(seq 60); do
		[ -e "/proc/$1" ] || return 0
		sleep 1
	done
	echo "$2 $1 did not stop in 60 s; killing it" >&2
	kill -KILL "$1" 2>/dev/null || true
}
