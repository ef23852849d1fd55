#!/usr/bin/env bash
# Runs every fuzz target in the tree (each `func FuzzXxx` in a _test.go
# file) for FUZZTIME each, one after another, and prints a line per target:
# its package, how long it ran, the executions and the new inputs it found.
# A crash stops the run with the fuzzer's report; the input that failed is
# left in the package's testdata/fuzz/ as a regression seed for `go test`.
# `make test` runs every target's seed corpus as an ordinary test.
#
#   hack/fuzz/run.sh [PACKAGE...]     (default: ./...)
#   FUZZTIME=30s FUZZPARALLEL=2 hack/fuzz/run.sh ./internal/format/udf
set -euo pipefail
cd "$(dirname "$0")/../.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5m}
# One worker by default: the machines here have two cores, and a fuzzer
# with every core starves whatever else runs.
FUZZPARALLEL=${FUZZPARALLEL:-1}
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)

mapfile -t listed < <($GO list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' "${pkgs[@]}")
summary=()
for pkg in "${listed[@]}"; do
	# go test -list prints the matching names, then "ok <pkg> <time>".
	mapfile -t targets < <($GO test -run '^$' -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
	for target in "${targets[@]}"; do
		echo "== $pkg $target ($FUZZTIME)"
		log=$(mktemp)
		start=$(date +%s)
		if ! $GO test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -parallel "$FUZZPARALLEL" "$pkg" 2>&1 | tee "$log"; then
			echo "FAIL: $pkg $target found a failing input; the fuzzer's report is above"
			rm -f "$log"
			exit 1
		fi
		last=$(grep -E 'fuzz: elapsed' "$log" | tail -1)
		rm -f "$log"
		execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
		interesting=$(sed -nE 's/.*new interesting: ([0-9]+).*/\1/p' <<<"$last")
		summary+=("$(printf '%-45s %-28s %5ss %12s execs %5s new' "${pkg#github.com/hwk-dev/hwk/}" "$target" "$(($(date +%s) - start))" "${execs:-?}" "${interesting:-?}")")
	done
done
echo
echo "== every target ran $FUZZTIME without a failing input"
printf '%s\n' "${summary[@]}"
