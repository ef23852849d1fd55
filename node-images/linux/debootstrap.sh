#!/bin/sh
# debootstrap.sh ROOT SUITE MIRROR PACKAGES
# Makes a minimal Debian root with PACKAGES (comma-separated). hwk caches
# the result by suite, mirror and package list, so this runs once per change.
set -eu
root=$1 suite=$2 mirror=$3 packages=$4

if ! command -v debootstrap >/dev/null; then
	echo "debootstrap is not installed (Debian/Ubuntu: apt-get install debootstrap)" >&2
	exit 1
fi
# minbase: essential packages and apt only; everything else is listed.
debootstrap --variant=minbase --components=main --include="$packages" \
	"$suite" "$root" "$mirror"
