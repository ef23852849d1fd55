#!/bin/sh
# Installs hwk from a release: downloads the archive for this OS and CPU
# and the release's checksums.txt, checks the archive's SHA-256 against it
# (and installs nothing when they differ), then puts hwk, and the Windows
# node programs it packs in windows-amd64/, into the install directory.
#
#   curl -fsSL https://raw.githubusercontent.com/hwk-dev/hwk/main/install.sh | sh
#   curl -fsSL .../install.sh | sh -s -- v0.1.0        # a given version
#
# HWK_INSTALL_DIR  where hwk goes (default: ~/.local/bin)
# HWK_RELEASE_URL  where releases are (default: https://github.com/hwk-dev/hwk/releases)
set -eu

version=${1:-${HWK_VERSION:-latest}}
releases=${HWK_RELEASE_URL:-https://github.com/hwk-dev/hwk/releases}
dir=${HWK_INSTALL_DIR:-$HOME/.local/bin}

fail() {
	echo "install.sh: $*" >&2
	exit 1
}

fetch() { # URL FILE
	if command -v curl >/dev/null; then
		curl -fsSL -o "$2" "$1"
	elif command -v wget >/dev/null; then
		wget -q -O "$2" "$1"
	else
		fail "needs curl or wget"
	fi
}

case $(uname -s) in
Linux) os=linux ;;
Darwin) os=darwin ;;
*) fail "$(uname -s) is not a host hwk has a release for here; on Windows use install.ps1" ;;
esac
case $(uname -m) in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) fail "$(uname -m) is not a CPU hwk has a release for (amd64, arm64)" ;;
esac

if [ "$version" = latest ]; then
	# The latest release's page redirects to its tag; with no release
	# there is no such page (404) or it leads elsewhere than a tag.
	command -v curl >/dev/null || fail "finding the latest version needs curl; give a version: sh install.sh v0.1.0"
	latest=$(curl -sSLI -o /dev/null -w '%{http_code} %{url_effective}' "$releases/latest") || fail "cannot reach $releases"
	case $latest in
	200\ */tag/*) version=${latest##*/} ;;
	200\ * | 404\ *) fail "$releases has no latest release (none is published yet): give a version that exists, or build hwk from source (make build in a checkout)" ;;
	*) fail "$releases/latest answered HTTP ${latest%% *}; try again later, or give a version: sh install.sh v0.1.0" ;;
	esac
fi
case $version in
v*) ;;
*) fail "version $version is not a release tag (like v0.1.0)" ;;
esac

archive="hwk_${version#v}_${os}_${arch}.tar.gz"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "Downloading $archive ($version)..."
fetch "$releases/download/$version/$archive" "$tmp/$archive" || fail "cannot download $releases/download/$version/$archive"
fetch "$releases/download/$version/checksums.txt" "$tmp/checksums.txt" || fail "cannot download the release's checksums.txt"

want=$(awk -v f="$archive" '$2 == f { print $1 }' "$tmp/checksums.txt")
[ -n "$want" ] || fail "checksums.txt of $version does not list $archive; nothing was installed"
if command -v sha256sum >/dev/null; then
	got=$(sha256sum "$tmp/$archive" | awk '{ print $1 }')
else
	got=$(shasum -a 256 "$tmp/$archive" | awk '{ print $1 }')
fi
[ "$got" = "$want" ] || fail "$archive has SHA-256 $got, but checksums.txt says $want: the download is corrupt or was tampered with; nothing was installed"

mkdir -p "$tmp/x"
tar -xzf "$tmp/$archive" -C "$tmp/x"
[ -x "$tmp/x/hwk" ] || fail "$archive holds no hwk"
mkdir -p "$dir/windows-amd64"
cp "$tmp/x/hwk" "$dir/hwk.new" && mv "$dir/hwk.new" "$dir/hwk"
cp "$tmp/x/windows-amd64/"* "$dir/windows-amd64/"
echo "Installed hwk $version in $dir (checksum verified)."
case ":$PATH:" in
*":$dir:"*) ;;
*) echo "Add it to PATH: export PATH=\"$dir:\$PATH\"" ;;
esac
