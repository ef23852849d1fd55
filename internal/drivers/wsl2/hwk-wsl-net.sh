#!/bin/sh
# hwk-wsl-net gives this WSL node its stable address. In NAT mode WSL
# gives its VM a new address on its own switch at every start; the node
# keeps the address hwk chose on the cluster's node network as a second
# one, and reaches that network through the host (which routes the
# node's address to the VM in turn). Settings in /etc/hwk/wsl-net:
#   ADDRESS  the node's address (its kubelet's node IP, the API server's)
#   SUBNET   the cluster's node network
# It runs at every boot and is idempotent.
set -eu
# shellcheck source=/dev/null
. /etc/hwk/wsl-net

route=$(ip -4 route show default)
dev=$(echo "$route" | awk '{ for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit } }')
gw=$(echo "$route" | awk '{ for (i = 1; i < NF; i++) if ($i == "via") { print $(i + 1); exit } }')
if [ -z "$dev" ] || [ -z "$gw" ]; then
	echo "hwk-wsl-net: WSL has not configured the network yet (no default route)" >&2
	exit 1
fi
ip -4 addr replace "$ADDRESS/32" dev "$dev"
# Traffic to the node network leaves from the node's own address, so
# that the Windows workers see the address they know.
ip -4 route replace "$SUBNET" via "$gw" dev "$dev" src "$ADDRESS"
echo "hwk-wsl-net: $ADDRESS on $dev, $SUBNET via $gw"
