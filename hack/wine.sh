#!/usr/bin/env bash
# Runs hwk's windows/amd64 programs on this Linux machine under Wine 10
# (make test-windows, make e2e-wine). Debian bookworm's Wine 8 cannot
# start Go 1.26's Windows binaries (Go needs ProcessPrng from
# bcryptprimitives.dll), so Wine comes from a Debian trixie root of its
# own, made once with debootstrap and cached; nothing is installed on the
# host.
#
#   hack/wine.sh root                       make the root if needed, print its path
#   hack/wine.sh go                         make Go for Windows if needed, print its GOROOT
#   hack/wine.sh prefix DIR                 make a fresh Wine prefix (C:\) in DIR
#   hack/wine.sh run [-g] [-b DIR]... CMD   run CMD in the root
#
# `run` starts CMD (e.g. `wine x.exe`) chrooted into the root, in mount
# and pid namespaces of its own: each -b DIR is bound at the same path
# inside (so Z:\work\x is /work/x on both sides), the host's DNS files
# and trusted certificates are bound over the root's, and when CMD ends
# the kernel ends everything it started (wineserver, Wine's services,
# any child), so nothing outlives a run and nothing is stopped by name.
# CMD runs as root with the caller's environment; set WINEPREFIX to a
# directory made by `prefix` (and bind it with -b).
#
# -g puts Go for Windows first on Windows' PATH, with the host's module
# cache and proxy settings and a build cache of its own that outlives
# runs: the module proxy serves no Windows toolchain here, so it is built
# once from the host Go's own source (GOOS=windows make.bash).
#
# The root is remade when its recipe (below) changes, Go when the host's
# Go does; older ones are removed. HWK_WINE_CACHE moves the cache
# (default ~/.cache/hwk-wine). Needs root, debootstrap and util-linux's
# unshare.
set -euo pipefail
export PATH="/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

# The recipe: what the root is made from. Any change makes a new root.
suite=trixie
mirror=${HWK_WINE_MIRROR:-http://deb.debian.org/debian}
# wine64 and wine are Wine 10.0 in trixie; ca-certificates gives Wine's
# crypt32 the roots it loads from /etc/ssl/certs (hwk.exe's HTTPS).
packages="wine64 wine ca-certificates"
recipe="suite=$suite packages=$packages variant=minbase recipe=2"

cache=${HWK_WINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hwk-wine}
key=$(printf '%s' "$recipe" | sha256sum | cut -c1-12)
root=$cache/root-$key

die() { echo "hack/wine.sh: $*" >&2; exit 1; }

# lock: one maker at a time; a second waits and then finds it made.
lock() {
	mkdir -p "$cache"
	exec 9>"$cache/.lock"
	flock 9
}

make_root() {
	[ -e "$root/.done" ] && return
	[ "$(id -u)" -eq 0 ] || die "making the Wine root needs root (debootstrap, chroot)"
	command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap)"
	lock
	[ -e "$root/.done" ] && return
	local work=$cache/.new-$key
	rm -rf "$work"
	echo "making the Wine root ($suite, $packages) in $root, once: about a minute" >&2
	debootstrap --variant=minbase "$suite" "$work" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
		{ tail -20 "$cache/debootstrap.log" >&2; die "debootstrap $suite failed (log: $cache/debootstrap.log)"; }
	# apt inside the root needs /proc and /dev; a mount namespace keeps
	# them from the host's mount table and drops them when it ends.
	# shellcheck disable=SC2016
	unshare --mount --propagation private sh -ec '
		mount -t proc proc "$1/proc"
		mount --rbind /dev "$1/dev"
		mount --bind /etc/resolv.conf "$1/etc/resolv.conf"
		chroot "$1" sh -ec "apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $2 >/dev/null; apt-get clean"
		chroot "$1" wine --version >"$1/.wine-version" 2>/dev/null
	' sh "$work" "$packages" >"$cache/apt.log" 2>&1 ||
		{ tail -20 "$cache/apt.log" >&2; die "installing $packages in the root failed (log: $cache/apt.log)"; }
	touch "$work/.done"
	rm -rf "$root"
	mv "$work" "$root"
	# Roots of older recipes: 1.5 GB each.
	for old in "$cache"/root-*; do
		[ "$old" = "$root" ] || rm -rf "$old"
	done
	echo "made the Wine root: $(cat "$root/.wine-version")" >&2
}

# make_go makes Go for windows/amd64 from the host Go's source, laid out
# as Go's Windows distribution is (bin\go.exe, pkg\tool\windows_amd64).
goroot=
make_go() {
	local host version
	host=$(go env GOROOT)
	version=$(go env GOVERSION)
	goroot=$cache/go-$version-windows-amd64
	[ -e "$goroot/.done" ] && return
	lock
	[ -e "$goroot/.done" ] && return
	local work=$cache/.new-go
	rm -rf "$work"
	echo "building Go $version for windows/amd64 from $host's source, once: a few minutes" >&2
	cp -a "$host" "$work"
	chmod -R u+w "$work"
	rm -rf "${work:?}/pkg/tool" "${work:?}/bin"
	(cd "$work/src" && GOROOT_BOOTSTRAP=$host GOOS=windows GOARCH=amd64 GOFLAGS="" ./make.bash --no-banner) >"$cache/go.log" 2>&1 ||
		{ tail -20 "$cache/go.log" >&2; die "building Go for Windows failed (log: $cache/go.log)"; }
	mv "$work"/bin/windows_amd64/*.exe "$work/bin/"
	rm -rf "$work/bin/windows_amd64" "$work/bin/go" "$work/bin/gofmt" "$work/pkg/tool/linux_amd64"
	[ -x "$work/bin/go.exe" ] && [ -d "$work/pkg/tool/windows_amd64" ] || die "make.bash made no bin/go.exe and pkg/tool/windows_amd64 (log: $cache/go.log)"
	touch "$work/.done"
	for old in "$cache"/go-*-windows-amd64; do
		[ "$old" = "$goroot" ] || rm -rf "$old"
	done
	mv "$work" "$goroot"
}

# winpath is a path of the root as Windows programs under Wine name it.
winpath() { printf 'Z:%s' "${1//\//\\}"; }

# run_in BINDS... -- CMD...: CMD in the root, in new mount and pid
# namespaces (--kill-child: CMD's end ends every process it started).
run_in() {
	local binds=()
	while [ "$1" != -- ]; do binds+=("$1"); shift; done
	shift
	# shellcheck disable=SC2016
	exec unshare --mount --propagation private --pid --fork --kill-child sh -ec '
		root=$1; shift
		mount -t proc proc "$root/proc"
		mount --rbind /dev "$root/dev"
		mount -t tmpfs tmpfs "$root/tmp"
		for f in /etc/resolv.conf /etc/hosts; do [ -e "$f" ] && touch "$root$f" && mount --bind "$f" "$root$f"; done
		# The trusted roots of the host (its own CAs too, such as those of
		# a proxy), which crypt32 in Wine loads from /etc/ssl/certs.
		mount --rbind /etc/ssl/certs "$root/etc/ssl/certs"
		while [ "$1" != -- ]; do
			mkdir -p "$root$1"
			mount --rbind "$1" "$root$1"
			shift
		done
		shift
		cwd=/
		[ -d "$root$PWD" ] && cwd=$PWD
		# Wine wants a runtime directory (else it complains on stderr).
		export XDG_RUNTIME_DIR=/tmp/xdg
		mkdir -m 0700 -p "$root$XDG_RUNTIME_DIR"
		# wineserver writes the registry back when it exits, a second
		# after its last client (-p1); the namespace ends when this shell
		# does, so wait for that before leaving.
		[ -z "${WINEPREFIX:-}" ] || chroot "$root" wineserver -p1
		# This shell is the namespace'"'"'s init, which ignores signals it
		# has no trap for: SIGTERM or SIGINT (timeout, Ctrl-C) end it, and
		# with it everything in the namespace. CMD runs in the background
		# so that the trap runs at once; its stdin stays the caller'"'"'s.
		trap "exit 143" TERM
		trap "exit 130" INT
		exec 3<&0
		chroot "$root" /usr/bin/env -C "$cwd" "$@" <&3 3<&- &
		exec 3<&-
		rc=0
		wait $! || rc=$?
		[ -z "${WINEPREFIX:-}" ] || chroot "$root" wineserver -w
		exit $rc
	' sh "$root" "${binds[@]}" -- "$@"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
root)
	make_root
	echo "$root"
	;;
go)
	make_go
	echo "$goroot"
	;;
prefix)
	[ $# -eq 1 ] || die "usage: hack/wine.sh prefix DIR"
	make_root
	dir=$(realpath -m "$1")
	rm -rf "$dir"
	mkdir -p "$dir"
	# wineboot makes C:\ with the user's folders; its complaints about a
	# missing wine32 and syswow64 concern 32-bit programs, which hwk has
	# none of.
	WINEPREFIX=$dir WINEDEBUG=-all run_in "$dir" -- wineboot --init >"$dir.log" 2>&1 ||
		{ tail -20 "$dir.log" >&2; die "wineboot --init in $dir failed"; }
	[ -f "$dir/system.reg" ] && [ -d "$dir/drive_c/users/root/AppData/Local" ] ||
		die "wineboot made no registry or C:\\users\\root\\AppData\\Local in $dir (log: $dir.log)"
	;;
run)
	make_root
	binds=()
	with_go=
	while [ $# -gt 0 ]; do
		case $1 in
		-b) binds+=("$(realpath "$2")"); shift 2 ;;
		-g) with_go=1; shift ;;
		--) shift; break ;;
		*) break ;;
		esac
	done
	[ $# -gt 0 ] || die "usage: hack/wine.sh run [-g] [-b DIR]... CMD..."
	if [ -n "$with_go" ]; then
		make_go
		modcache=$(go env GOMODCACHE)
		gocache=$cache/go-build-windows
		mkdir -p "$modcache" "$gocache"
		binds+=("$goroot" "$modcache" "$gocache")
		WINEPATH="$(winpath "$goroot/bin")${WINEPATH:+;$WINEPATH}"
		GOMODCACHE=$(winpath "$modcache")
		GOCACHE=$(winpath "$gocache")
		GOPROXY=$(go env GOPROXY)
		GOSUMDB=$(go env GOSUMDB)
		GONOSUMDB=$(go env GONOSUMDB)
		GOFLAGS=$(go env GOFLAGS)
		export WINEPATH GOMODCACHE GOCACHE GOPROXY GOSUMDB GONOSUMDB GOFLAGS
		export GOTOOLCHAIN=local GOTELEMETRY=off
	fi
	# The working directory is CMD's when it is under a bound directory,
	# else CMD starts in /.
	run_in "${binds[@]}" -- "$@"
	;;
*)
	die "usage: hack/wine.sh root | go | prefix DIR | run [-g] [-b DIR]... CMD..."
	;;
esac
