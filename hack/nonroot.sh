#!/usr/bin/env bash
# make nonroot (.ci/run's "non-root" stage): hwk's promise that an
# ordinary user builds the Linux node image and brings up a cluster
# without sudo, checked as such a user: a member of the docker group with
# a home, a Go module cache and a hwk cache of its own.
#
# The user (HWK_NONROOT_USER, default hwk-nonroot) is made for the run
# and removed at its end with its home. Its hwk cache starts with a copy
# of the component binaries this machine's root build made (compiling
# Kubernetes again would take half an hour), and nothing else: no module
# cache, no wrapper modules, no images, so the build fetches the modules
# an image needs (Calico's) through the Go module proxy, packs the images
# and makes the root and its formats, as a user whose binaries came from
# elsewhere would. Then hwk up from that image, status, and down.
#
# Needs root (to make the user), a Docker engine whose socket the docker
# group may use, and the node image built by root first (make node-image).
set -euo pipefail
cd "$(dirname "$0")/.."

user=${HWK_NONROOT_USER:-hwk-nonroot}
name=ci-nonroot
[ "$(id -u)" = 0 ] || { echo "hack/nonroot.sh makes a user: run it as root" >&2; exit 1; }
[[ $user =~ ^[a-z][a-z0-9-]{0,30}$ ]] || { echo "HWK_NONROOT_USER must be a plain user name, not '$user'" >&2; exit 1; }
cache=${HWK_HOME:+$HWK_HOME/cache}
cache=${cache:-${XDG_CACHE_HOME:-$HOME/.cache}/hwk}
compgen -G "$cache/build/kubernetes-*" >/dev/null ||
	{ echo "no component binaries in $cache/build: build the node image as root first (make node-image)" >&2; exit 1; }
go=$(command -v go) || { echo "no go on PATH" >&2; exit 1; }

# The engine's socket, as this run reaches it.
sock=${DOCKER_HOST:-unix:///var/run/docker.sock}
sock=${sock#unix://}
[ -S "$sock" ] || { echo "no Docker socket at $sock (DOCKER_HOST)" >&2; exit 1; }
getent group docker >/dev/null || { echo "no docker group: the engine's socket must belong to it" >&2; exit 1; }
[ "$(stat -c %G "$sock")" = docker ] ||
	{ echo "$sock belongs to group $(stat -c %G "$sock"), not docker: start the engine after the docker group exists" >&2; exit 1; }

if id "$user" >/dev/null 2>&1; then
	# Only a user this script made (its marker in the home) is reused.
	home=$(getent passwd "$user" | cut -d: -f6)
	[ -e "$home/.hwk-nonroot" ] || { echo "user $user exists and is not this script's: set HWK_NONROOT_USER" >&2; exit 1; }
	userdel -r "$user" 2>/dev/null || true
fi
useradd --create-home --shell /bin/bash --groups docker "$user"
home=$(getent passwd "$user" | cut -d: -f6)
touch "$home/.hwk-nonroot"
work=$(mktemp -d /tmp/hwk-nonroot.XXXXXX)
cleanup() {
	local rc=$?
	set +e
	if [ -n "${up_started:-}" ]; then
		as_user "$work/hwk" down --name "$name" >/dev/null 2>&1
	fi
	rm -rf "$work"
	# The user's processes are gone (each command above waited for its
	# own); its home holds only what the run made.
	userdel -r "$user" 2>/dev/null
	exit "$rc"
}
trap cleanup EXIT

# hwk and the Go toolchain where the user can run them (a CI clone may sit
# under /root); the machine's Go settings (GOFLAGS, GOTOOLCHAIN) as root has them.
install -m 0755 bin/hwk "$work/hwk"
chmod 0755 "$work"
goenv=$(go env GOENV)
if [ -f "$goenv" ]; then
	install -D -o "$user" -m 0644 "$goenv" "$home/.config/go/env"
fi
mkdir -p "$home/.cache/hwk"
cp -a "$cache/build" "$home/.cache/hwk/build"
rm -rf "$home/.cache/hwk/build/modules" "$home/.cache/hwk/build/vm"
chown -R "$user:$user" "$home"
echo "user $user (uid $(id -u "$user"), groups $(id -Gn "$user")), home $home: $(du -sh "$home/.cache/hwk/build" | cut -f1) of component binaries copied, no module cache"

# The user's environment is its own, but for how this machine reaches the
# Go module proxy and Debian's mirror.
pass=()
for v in GOPROXY GOSUMDB GONOSUMDB GOPRIVATE GOINSECURE HWK_DEBIAN_MIRROR HTTP_PROXY HTTPS_PROXY NO_PROXY http_proxy https_proxy no_proxy; do
	[ -z "${!v:-}" ] || pass+=("$v=${!v}")
done
as_user() {
	runuser -u "$user" -- env -i HOME="$home" USER="$user" PATH="$(dirname "$go"):/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
		DOCKER_HOST="unix://$sock" "${pass[@]}" "$@"
}

cd "$home"
as_user sh -c 'id; go env GOMODCACHE; ls "$(go env GOMODCACHE)" 2>/dev/null | wc -l'
as_user "$work/hwk" node-image build linux --source source --formats docker
up_started=1
as_user "$work/hwk" up --name "$name" --driver docker --windows-workers 0
as_user "$work/hwk" status --name "$name"
as_user "$work/hwk" down --name "$name"
up_started=
# What the user made belongs to the user: nothing in its home is root's.
if found=$(find "$home" ! -user "$user" -print -quit) && [ -n "$found" ]; then
	echo "$found in $user's home is not the user's: hwk wrote it as another user" >&2
	exit 1
fi
echo "non-root: the node image built and hwk up, status and down ran as $user"
