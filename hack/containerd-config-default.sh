#!/usr/bin/env bash
# Regenerates internal/testing/pssim/testdata/containerd-VERSION-config-
# default-windows.toml: what `containerd.exe config default` prints on
# Windows, which pssim answers provision.ps1 with. VERSION is the one
# node-images/windows/components.yaml pins; containerd.exe is built as
# hwk's Windows image builds it (pkg/nodeimage/binaries.go: the wrapper
# module of node-images/{windows,linux}/modules, components.yaml's tags
# and ldflags, -trimpath -s -w, CGO_ENABLED=0, GOOS=windows) and run
# under Wine 10 (hack/wine.sh). Beside the .toml it writes a .txt saying
# how it was made. Older versions' files are removed; pssim embeds the
# one left (its test fails when that is not the pinned version's).
#
#   hack/containerd-config-default.sh
#
# Needs root (hack/wine.sh) and Go; the module proxy gives the modules.
set -euo pipefail
export PATH="/usr/local/go/bin:$PATH"

here=$(cd "$(dirname "$0")/.." && pwd)
components=$here/node-images/windows/components.yaml
testdata=$here/internal/testing/pssim/testdata

# containerd's entry of components.yaml: from its "- name:" line to the
# next component's.
entry=$(awk '/^  - name: /{on = ($3 == "containerd")} on' "$components")
[ -n "$entry" ] || { echo "no containerd in $components" >&2; exit 1; }
version=$(awk '$1 == "version:" {print $2; exit}' <<<"$entry")
tags=$(sed -n 's/^ *tags: *\[\(.*\)\] *$/\1/p' <<<"$entry" | tr -d ' ')
ldflags="-s -w"
while IFS= read -r f; do
	ldflags+=" ${f//\{\{.Version\}\}/$version}"
done < <(awk '/^ *ldflags:/ {on = 1; next} on && /^ *- / {sub(/^ *- /, ""); print; next} {on = 0}' <<<"$entry")
[ -n "$version" ] || { echo "containerd has no version in $components" >&2; exit 1; }

mod=
for d in "$here/node-images/windows/modules" "$here/node-images/linux/modules"; do
	if [ -f "$d/containerd-$version.mod" ]; then
		mod=$d/containerd-$version
		break
	fi
done
[ -n "$mod" ] || { echo "no wrapper module containerd-$version.mod in node-images/{windows,linux}/modules" >&2; exit 1; }

work=$(mktemp -d /tmp/hwk-ctrd.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/bin"
cp "$mod.mod" "$work/src/go.mod"
cp "$mod.sum" "$work/src/go.sum"

echo "building containerd $version for windows/amd64" >&2
build=(go build -trimpath -ldflags "$ldflags")
[ -z "$tags" ] || build+=(-tags "$tags")
build+=(-o "$work/bin/" github.com/containerd/containerd/v2/cmd/containerd)
(cd "$work/src" && CGO_ENABLED=0 GOOS=windows GOARCH=amd64 GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off "${build[@]}")

echo "running containerd.exe config default under Wine" >&2
"$here/hack/wine.sh" prefix "$work/prefix"
ctrd() {
	WINEPREFIX=$work/prefix WINEDEBUG=-all "$here/hack/wine.sh" run -b "$work/prefix" -b "$work/bin" wine "$work/bin/containerd.exe" "$@"
}
ctrd config default >"$work/config.toml" 2>"$work/stderr"
if [ -s "$work/stderr" ]; then
	echo "containerd.exe config default wrote to stderr:" >&2
	cat "$work/stderr" >&2
	exit 1
fi
# "containerd PACKAGE VERSION REVISION": the revision is empty here.
ctrversion=$(ctrd --version)
ctrversion=${ctrversion%" "}
case $ctrversion in
*" $version") ;;
*) echo "containerd.exe --version says \"$ctrversion\", not $version" >&2; exit 1 ;;
esac
root=$("$here/hack/wine.sh" root)
wineversion=$(cat "$root/.wine-version")
# The one line that names the machine: containerd's default platform,
# with the build number Windows reports (under Wine, Wine's own).
platform=$(grep -o "windows([0-9.]*)/amd64" "$work/config.toml" || true)

mkdir -p "$testdata"
rm -f "$testdata"/containerd-*-config-default-windows.toml "$testdata"/containerd-*-config-default-windows.txt
name=containerd-$version-config-default-windows
cp "$work/config.toml" "$testdata/$name.toml"
cat >"$testdata/$name.txt" <<EOF
$name.toml is the unmodified standard output of
\`containerd.exe config default\` (containerd for windows/amd64) run
under Wine, made by hack/containerd-config-default.sh on $(date -u +%Y-%m-%d).

containerd: $ctrversion (no revision: components.yaml's ldflags set none)
  module: $(basename "$mod").mod (go.mod) and .sum, from $(dirname "${mod#"$here"/}")
  build:  CGO_ENABLED=0 GOOS=windows GOARCH=amd64 GOFLAGS='-mod=readonly -buildvcs=false'
          go build -trimpath -ldflags '$ldflags'
          ${tags:+-tags $tags }github.com/containerd/containerd/v2/cmd/containerd
  Go:     $(go env GOVERSION)
Wine: $wineversion (Debian trixie's, hack/wine.sh), a fresh prefix
  run:    WINEPREFIX=PREFIX WINEDEBUG=-all hack/wine.sh run -b PREFIX -b BIN
          wine BIN/containerd.exe config default

What comes from Wine rather than Windows:
- $platform (plugins.'io.containerd.runtime.v2.task'.platforms) holds
  the build number Windows reports (RtlGetNtVersionNumbers, through
  github.com/containerd/platforms' DefaultSpec): Wine's default Windows
  10 version. Windows Server 2022 says 10.0.20348, 2025 10.0.26100.
  The file keeps Wine's; pssim puts its machine's build there.
- The paths come from %ProgramData% and %ProgramFiles%, which Wine sets
  to C:\\ProgramData and C:\\Program Files, as Windows does: nothing to
  change.
EOF
echo "wrote $testdata/$name.toml and .txt" >&2
