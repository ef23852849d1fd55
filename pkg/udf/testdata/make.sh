#!/bin/sh
# Regenerates udf.iso.gz, the UDF fixture (a UDF 1.02 bridge disc with a
# Joliet/ISO 9660 side, the shape of Windows installation media), from
# tree/ with Debian's genisoimage. udf_test.go also builds a fresh one
# when genisoimage is installed.
set -e
cd "$(dirname "$0")"
genisoimage -quiet -udf -iso-level 3 -J -V HWKUDFTEST -o udf.iso tree
gzip -9n -f udf.iso
