#!/usr/bin/env bash
# The Action's main step, started by action/main.js with the inputs as
# HWK_INPUT_* variables: checks the inputs, installs hwk, loads the node
# images it was given (or gets the Linux one: action/nodeimage.sh), makes
# the cluster and writes the step's outputs.
# The cluster is recorded for the post step before anything is made, so a
# failed or cancelled up is cleaned up as well.
set -euo pipefail

fail() {
	echo "::error title=hwk::$*"
	exit 1
}

name=${HWK_INPUT_NAME:-hwk}
config=${HWK_INPUT_CONFIG:-}
version=${HWK_INPUT_VERSION:-latest}
hwk_path=${HWK_INPUT_HWK_PATH:-}
node_image=${HWK_INPUT_NODE_IMAGE:-}
linux_workers=${HWK_INPUT_LINUX_WORKERS:-}
windows_workers=${HWK_INPUT_WINDOWS_WORKERS:-}
windows_image=${HWK_INPUT_WINDOWS_IMAGE:-}
kubernetes_version=${HWK_INPUT_KUBERNETES_VERSION:-}
wait=${HWK_INPUT_WAIT:-6m}
temp=${RUNNER_TEMP:-${TMPDIR:-/tmp}}
: "${GITHUB_OUTPUT:?the Action runs under GitHub Actions, which sets GITHUB_OUTPUT}"
: "${GITHUB_STATE:?the Action runs under GitHub Actions, which sets GITHUB_STATE}"

# The Action's own inputs first; hwk checks the cluster's (config validate
# below), all before anything is made.
case ${HWK_INPUT_EXPORT_LOGS:-on-failure} in
on-failure | always | never) ;;
*) fail "input export-logs: \"$HWK_INPUT_EXPORT_LOGS\" is not one of on-failure, always, never" ;;
esac
check_count() { # INPUT VALUE
	[[ -z $2 || $2 =~ ^[0-9]+$ ]] || fail "input $1: \"$2\" is not a number of nodes"
}
check_count linux-workers "$linux_workers"
check_count windows-workers "$windows_workers"
[ -z "$config" ] || [ -f "$config" ] || fail "input config: no file $config (paths are relative to the workspace, $PWD)"
[ -z "$windows_image" ] || [ -f "$windows_image" ] ||
	fail "input windows-image: no file $windows_image; restore it with actions/cache first (see the Action's documentation), or make it with hwk node-image save"
if [ "${windows_workers:-0}" -gt 0 ]; then
	[ -n "$windows_image" ] || fail "input windows-workers is $windows_workers but windows-image is empty: Windows node images cannot be downloaded; give the archive hwk node-image save wrote"
	[ "$(uname -s)" = Linux ] || fail "Windows workers need a Linux runner with KVM; this runner is $(uname -s) (GitHub's Windows and macOS runners have no nested virtualization)"
	[ -e /dev/kvm ] || fail "Windows workers need KVM, and this runner has no /dev/kvm; use a Linux runner that has it (GitHub's ubuntu runners for public repositories, or larger runners), or windows-workers: 0"
fi

# hwk: the binary hwk-path names, or a release checked against its
# checksums.txt by install.sh (which also takes HWK_RELEASE_URL).
if [ -n "$hwk_path" ]; then
	[ -x "$hwk_path" ] || fail "input hwk-path: $hwk_path is not an executable"
	hwk=$(cd "$(dirname "$hwk_path")" && pwd)/$(basename "$hwk_path")
else
	dir=${RUNNER_TOOL_CACHE:-$temp}/hwk/$version
	echo "::group::Installing hwk $version"
	# PATH gets the directory through GITHUB_PATH, so install.sh need not
	# say how to add it.
	if ! PATH="$dir:$PATH" HWK_INSTALL_DIR=$dir sh "$HWK_ACTION_DIR/install.sh" "$version"; then
		echo "::endgroup::"
		if [ "$version" = latest ]; then
			# Until hwk has a release there is none to install: the
			# way in is an hwk the workflow builds itself.
			fail "installing the latest hwk release failed (install.sh says why above; with no release published there is none). Build hwk in the workflow (go build -o hwk ./cmd/hwk in a checkout of hwk-dev/hwk) and give its path as the hwk-path input, or set version to a release that exists"
		fi
		fail "installing hwk $version failed (install.sh says why above): set version to a release that exists, or build hwk and give its path as the hwk-path input"
	fi
	echo "::endgroup::"
	hwk=$dir/hwk
fi
bindir=$(dirname "$hwk")
echo "$bindir" >>"${GITHUB_PATH:-/dev/null}"
hwk_info=$("$hwk" version)
echo "$hwk_info"

args=(--name "$name")
[ -z "$config" ] || args+=(--config "$config")
[ -z "$kubernetes_version" ] || args+=(--kubernetes-version "$kubernetes_version")
[ -n "$linux_workers" ] || [ -n "$config" ] || linux_workers=0
[ -n "$windows_workers" ] || [ -n "$config" ] || windows_workers=0
[ -z "$linux_workers" ] || args+=(--linux-workers "$linux_workers")
[ -z "$windows_workers" ] || args+=(--windows-workers "$windows_workers")
# Without a config, Linux-only clusters run on the docker driver (every
# runner image has Docker). A cluster with Windows workers runs every node
# on libvirt: a cluster's nodes share one network, which docker and
# libvirt cannot both make.
if [ -z "$config" ]; then
	if [ "$windows_workers" -gt 0 ]; then
		args+=(--driver libvirt)
	else
		args+=(--driver docker)
	fi
fi
# A node image is an archive to load, or a reference up pulls.
node_archive=""
if [ -f "$node_image" ]; then
	node_archive=$node_image
elif [ -n "$node_image" ]; then
	args+=(--image "$node_image")
fi
resolved=$("$hwk" config validate "${args[@]}" -o json) ||
	fail "the cluster's settings are not valid: hwk config validate says why above"
kversion=$(sed -n 's/^  "kubernetesVersion": "\(.*\)",$/\1/p' <<<"$resolved")
[ -n "$kversion" ] || fail "hwk config validate -o json named no kubernetesVersion; this Action and hwk $hwk do not fit together (use the Action of the hwk release you install)"

# From here on something may be made: the post step deletes it.
{
	echo "cluster=$name"
	echo "hwk=$hwk"
} >>"$GITHUB_STATE"

if grep -q '"driver": "libvirt"' <<<"$resolved"; then
	echo "::group::Preparing libvirt and KVM"
	bash "$HWK_ACTION_DIR/action/libvirt.sh"
	echo "::endgroup::"
fi
if [ -n "$node_archive" ]; then
	echo "::group::Loading the Linux node image from $node_archive"
	"$hwk" node-image load -i "$node_archive"
	echo "::endgroup::"
elif [ -z "$node_image" ]; then
	# shellcheck source=action/nodeimage.sh
	. "$HWK_ACTION_DIR/action/nodeimage.sh"
	linux_node_image
fi
if [ -n "$windows_image" ]; then
	echo "::group::Loading the Windows node image from $windows_image"
	"$hwk" node-image load -i "$windows_image"
	echo "::endgroup::"
fi

"$hwk" up "${args[@]}" --wait "$wait"

kubeconfig=$temp/hwk-$name.kubeconfig
(umask 077 && "$hwk" get kubeconfig --name "$name" >"$kubeconfig")
{
	echo "kubeconfig=$kubeconfig"
	echo "context=hwk-$name"
	echo "cluster=$name"
} >>"$GITHUB_OUTPUT"
echo "Cluster $name is up: kubectl --context hwk-$name (or KUBECONFIG=$kubeconfig)"
