# shellcheck shell=bash disable=SC2154 # up.sh sets the variables this reads
# The Linux node image when the node-image input is empty, sourced by
# action/up.sh, whose variables it reads: hwk, hwk_info (what `hwk
# version` printed), kversion, resolved (the cluster as `hwk config
# validate -o json` prints it) and temp.
#
# The image this hwk release pins is pulled. When there is none to pull
# (no image is pinned until one is published, or the registry cannot be
# reached) the image is built on the runner, which is slow, so the built
# image is kept in the Actions cache under hwk's and Kubernetes' versions
# and the next run loads it from there instead. action/cache.js does the
# caching; the runner's Node.js (HWK_NODE, from run.js) runs it.

node=${HWK_NODE:-node}

# node_formats prints, comma-separated, the formats of the Linux node
# image that the cluster's Linux nodes without an image of their own boot:
# docker for the docker driver, qcow2 for libvirt (the two drivers a Linux
# runner has). Nothing when every Linux node names its image.
node_formats() {
	"$node" -e '
		const c = JSON.parse(require("fs").readFileSync(0, "utf8"));
		const byDriver = { docker: "docker", libvirt: "qcow2" };
		const formats = new Set();
		for (const n of c.nodes || []) {
			if (n.os !== "linux" || n.image) continue;
			if (!byDriver[n.driver]) {
				console.error(`node ${n.name}: the Action gets node images for the docker and libvirt drivers, not ${n.driver}`);
				process.exit(1);
			}
			formats.add(byDriver[n.driver]);
		}
		console.log([...formats].sort().join(","));
	' <<<"$resolved"
}

# have_node_image says whether the image for FORMATS is here already (a
# self-hosted runner's cache, or a step before this one built it), so that
# nothing is pulled or built: hwk's cache lists a Linux image of the
# version with every format, or, for the docker format, the engine has
# hwk/node:VERSION, which up uses also when it was built under another
# cache directory (with sudo).
have_node_image() { # FORMATS
	local listed
	if listed=$("$hwk" node-image list -o json) && "$node" -e '
		const [version, formats] = process.argv.slice(1);
		const list = JSON.parse(require("fs").readFileSync(0, "utf8")) || [];
		const ok = list.some((m) => m.os === "linux" && m.kubernetesVersion === version &&
			formats.split(",").every((f) => m.artifacts && m.artifacts[f]));
		process.exit(ok ? 0 : 1);
	' "$kversion" "$1" <<<"$listed"; then
		echo "hwk: using the Linux node image for Kubernetes $kversion in hwk's cache"
		return 0
	fi
	if [ "$1" = docker ] && docker image inspect "hwk/node:$kversion" >/dev/null 2>&1; then
		echo "hwk: using the Linux node image hwk/node:$kversion the Docker engine has"
		return 0
	fi
	return 1
}

# cache_key is the Actions cache key of the image: hwk's version and the
# Kubernetes version, which together fix what a build makes, plus the CPU
# and formats. A build that is not a release (v0.0.0-dev, or a version
# git describe made) can change what it builds from commit to commit, so
# its commit is in the key as well.
cache_key() { # FORMATS
	local version commit arch
	version=$(sed -n '1s/^hwk //p' <<<"$hwk_info")
	if ! [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-(alpha|beta|rc)\.?[0-9]+)?$ ]]; then
		commit=$(sed -n 's/^commit: *//p' <<<"$hwk_info")
		version="$version-${commit:0:12}"
	fi
	arch=$(uname -m)
	echo "hwk-node-image-linux-$arch-$version-$kversion-${1//,/-}"
}

# build_node_image builds the image for FORMATS as root, as the Action's
# other steps reach hwk's cache and the Docker engine (GitHub's runner
# user has passwordless sudo), from
# release downloads when they answer (action/release-reachable.sh), else
# from source through the Go module proxy, and says which it did and why.
build_node_image() { # FORMATS
	local why missing=()
	# A source build compiles C (runc, with libseccomp) as well as Go.
	command -v gcc >/dev/null || missing+=(gcc libc6-dev)
	[ -e /usr/include/seccomp.h ] || missing+=(libseccomp-dev)
	if [ ${#missing[@]} -gt 0 ]; then
		echo "hwk: installing what the node image build needs: ${missing[*]}"
		"${sudo[@]}" apt-get update -qq
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
	fi
	if ! why=$(sh "$HWK_ACTION_DIR/action/release-reachable.sh" "$kversion"); then
		echo "hwk: building the Linux node image for Kubernetes $kversion from source, not from release downloads: $why (tens of minutes)"
	else
		echo "::group::Building the Linux node image for Kubernetes $kversion from release downloads (minutes)"
		if "${sudo[@]}" "$hwk" node-image build linux --source release --kubernetes-version "$kversion" --formats "$1"; then
			echo "::endgroup::"
			echo "hwk: built the Linux node image for Kubernetes $kversion from release downloads"
			return 0
		fi
		echo "::endgroup::"
		echo "hwk: the build from release downloads failed (above); building from source instead (tens of minutes)"
	fi
	echo "::group::Building the Linux node image for Kubernetes $kversion from source"
	"${sudo[@]}" "$hwk" node-image build linux --source source --kubernetes-version "$kversion" --formats "$1" ||
		fail "building the Linux node image from source failed (above; hwk names its full build log); give the node-image input an image instead (an archive hwk node-image save wrote, or a registry reference)"
	echo "::endgroup::"
	echo "hwk: built the Linux node image for Kubernetes $kversion from source"
}

# cache_run runs action/cache.js: restore or save KEY FILE.
cache_run() {
	"$node" "$HWK_ACTION_DIR/action/cache.js" "$@"
}

linux_node_image() {
	local formats key archive status pull registry
	# build_node_image runs its commands with this too.
	local -a sudo
	formats=$(node_formats) || fail "cannot tell which node image formats the cluster needs (above)"
	if [ -z "$formats" ] || have_node_image "$formats"; then
		return 0
	fi
	# A config's images.registry is a mirror up would pull the pinned
	# image from; so does this pull.
	pull=(node-image pull "$kversion" --formats "$formats")
	registry=$("$node" -e 'const c = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log((c.images && c.images.registry) || "")' <<<"$resolved")
	[ -z "$registry" ] || pull+=(--registry "$registry")
	echo "::group::Pulling the Linux node image hwk pins for Kubernetes $kversion ($formats)"
	if "$hwk" "${pull[@]}"; then
		echo "::endgroup::"
		return 0
	fi
	echo "::endgroup::"
	echo "hwk: the pinned Linux node image for Kubernetes $kversion could not be pulled (above): taking it from the Actions cache, or else building it"

	# The build runs as root, whose hwk cache is not the runner user's:
	# the image then reaches the user's cache as an archive (save, load),
	# the same way a cached one does.
	sudo=()
	[ "$(id -u)" -eq 0 ] || sudo=(sudo env "PATH=$PATH")
	key=$(cache_key "$formats")
	archive=$temp/hwk-node-image.tar
	status=0
	cache_run restore "$key" "$archive" || status=$?
	case $status in
	0)
		echo "hwk: restored the Linux node image from the Actions cache (key $key)"
		echo "::group::Loading the Linux node image from the Actions cache"
		"$hwk" node-image load -i "$archive"
		echo "::endgroup::"
		rm -f "$archive"
		return 0
		;;
	10) echo "hwk: the Actions cache has no entry $key: building the image" ;;
	11) echo "hwk: no Actions cache here (above): building the image, which will not be kept for the next run" ;;
	*) echo "::warning title=hwk::restoring $key from the Actions cache failed (above): building the image" ;;
	esac

	build_node_image "$formats"
	if [ "$status" -ne 11 ] || [ ${#sudo[@]} -gt 0 ]; then
		echo "::group::Saving the Linux node image to $archive"
		"${sudo[@]}" "$hwk" node-image save -o "$archive" "$kversion" --formats "$formats"
		[ ${#sudo[@]} -eq 0 ] || sudo chown "$(id -u):$(id -g)" "$archive"
		echo "::endgroup::"
	fi
	if [ ${#sudo[@]} -gt 0 ]; then
		echo "::group::Loading the Linux node image built as root"
		"$hwk" node-image load -i "$archive"
		echo "::endgroup::"
	fi
	if [ "$status" -ne 11 ]; then
		if cache_run save "$key" "$archive"; then
			echo "hwk: saved the Linux node image in the Actions cache (key $key); the next run with this hwk and Kubernetes version loads it from there"
		else
			echo "::warning title=hwk::saving the Linux node image in the Actions cache failed (above); the next run builds it again"
		fi
	fi
	rm -f "$archive"
}
