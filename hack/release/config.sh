#!/usr/bin/env bash
# Prints .goreleaser.yaml for a snapshot of only the targets named
# (os/arch ...; none: all six): the release workflow builds all six, CI one per OS,
# which is what can break per OS at a third of the compile. The others
# go in the hwk build's `ignore` list; the node programs' builds inherit
# it through the YAML merge, so windows/amd64 (the node's) must stay.
set -euo pipefail
cd "$(dirname "$0")/../.."
all="windows/amd64 windows/arm64 linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"
# No targets: all of them, the config as it is.
if [ $# -eq 0 ]; then
	cat .goreleaser.yaml
	exit
fi
for t in "$@"; do
	case " $all " in *" $t "*) ;; *) echo "$0: $t is not a release target (targets: $all)" >&2; exit 2 ;; esac
done
case " $* " in *" windows/amd64 "*) ;; *) echo "$0: windows/amd64 must be built: every archive carries the Windows node's programs" >&2; exit 2 ;; esac
ignore=()
for t in $all; do
	case " $* " in *" $t "*) ;; *) ignore+=("      - {goos: ${t%/*}, goarch: ${t#*/}}") ;; esac
done
if [ ${#ignore[@]} -eq 0 ]; then
	cat .goreleaser.yaml
	exit
fi
# The first goarch line is the hwk build's, the anchor the others merge.
out=$(awk -v ignore="$(printf '%s\n' "    ignore:" "${ignore[@]}")" '
	{ print }
	!done && /^    goarch: \[amd64, arm64\]$/ { print ignore; done = 1 }
	END { if (!done) exit 1 }' .goreleaser.yaml) ||
	{ echo "$0: .goreleaser.yaml has no \"    goarch: [amd64, arm64]\" line for the hwk build: update this script" >&2; exit 1; }
printf '%s\n' "$out"
