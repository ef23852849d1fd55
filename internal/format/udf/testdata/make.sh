#!/bin/sh
# Regenerates udf.iso.gz, the UDF fixture (a UDF 1.02 bridge disc with a
# Joliet/ISO 9660 side, the shape of Windows installation media), from
# tree/ with Debian's genisoimage. udf_test.go also builds a fresh one
# when genisoimage is installed.
set -e
cd "$(dirname "$0")"
genisoimage -quiet -udf -iso-level 3 -J -V HWKUDFTEST -o udf.iso tree
gzip -9n -f udf.iso

# fuzz-seed.iso.gz, FuzzOpen's second seed: a smaller tree than tree/
# with what it lacks (a directory of identifiers over several sectors, a
# file over several, directories three deep), made the same way.
seed=$(mktemp -d)
mkdir -p "$seed/sources/sxs" "$seed/efi/microsoft/boot"
printf 'seed\r\n' > "$seed/README.TXT"
awk 'BEGIN { for (i = 0; i < 5000; i++) printf "%c", (i * 7 + 3) % 251 }' > "$seed/sources/install.wim"
: > "$seed/efi/microsoft/boot/empty.bin"
i=0
while [ $i -lt 40 ]; do
	printf '%d' $i > "$seed/sources/sxs/microsoft-windows-netfx3-ondemand-package-$i.cab"
	i=$((i + 1))
done
genisoimage -quiet -udf -iso-level 3 -J -V HWKFUZZSEED -o fuzz-seed.iso "$seed"
rm -r "$seed"
gzip -9n -f fuzz-seed.iso
