#!/bin/sh
# `make up`: from a fresh Linux machine with Go to a running cluster, in one
# command. It installs what is missing (the Docker engine, and the tools
# the node image build uses), builds hwk, pulls the Linux node image this
# hwk pins (or, when that fails, as it does with no registry, builds it:
# from release downloads when they answer, in minutes, else from source,
# in tens of minutes), and brings up the best cluster this host can
# serve: with a Windows worker when a Windows node image exists, else
# Linux-only on the docker driver, saying so. Extra arguments go to
# `hwk up` (e.g. make up ARGS="--linux-workers 1").
set -eu
cd "$(dirname "$0")/.."

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

missing=""
command -v dockerd >/dev/null || missing="$missing docker.io"
[ -e /usr/include/seccomp.h ] || missing="$missing libseccomp-dev"
command -v gcc >/dev/null || missing="$missing gcc libc6-dev"
if [ -n "$missing" ]; then
	echo "installing:$missing"
	$sudo apt-get update -qq
	# shellcheck disable=SC2086
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

if ! $sudo docker version >/dev/null 2>&1; then
	echo "starting the Docker engine"
	if ! $sudo systemctl start docker 2>/dev/null; then
		$sudo sh -c 'nohup dockerd >/var/log/hwk-dockerd.log 2>&1 &'
	fi
	for _ in $(seq 60); do $sudo docker version >/dev/null 2>&1 && break; sleep 1; done
	$sudo docker version >/dev/null || { echo "the Docker engine did not start (see /var/log/hwk-dockerd.log)"; exit 1; }
fi

make build
hwk=bin/hwk
version=$($hwk config validate --windows-workers 0 -o json | sed -n 's/.*"kubernetesVersion": "\(.*\)".*/\1/p')
if ! $sudo docker image inspect "hwk/node:$version" >/dev/null 2>&1; then
	echo "no Linux node image for Kubernetes $version: pulling the one this hwk pins"
	if ! pulled=$($sudo "$hwk" node-image pull "$version" --formats docker 2>&1); then
		echo "$pulled" | sed 's/^/  /'
		# The build needs the Docker engine, reached as above (with sudo
		# when not root); PATH keeps the user's Go. From release downloads it takes minutes, from source tens of
		# minutes: release when its downloads answer, source otherwise or
		# when the release build fails.
		source=source
		if why=$(sh action/release-reachable.sh "$version"); then
			echo "the pull failed (above): building the image from release downloads instead (a few minutes)"
			if $sudo env "PATH=$PATH" "$hwk" node-image build linux --source release --kubernetes-version "$version" --formats docker; then
				source=release
			else
				echo "the build from release downloads failed (above): building the image from source instead (about 20 minutes the first time)"
			fi
		else
			echo "the pull failed (above), and $why, so release downloads cannot be used: building the image from source instead (about 20 minutes the first time)"
		fi
		if [ "$source" = source ]; then
			$sudo env "PATH=$PATH" "$hwk" node-image build linux --source source --kubernetes-version "$version" --formats docker
		fi
		echo "built the Linux node image for Kubernetes $version from $source"
	fi
fi

args=""
if ! $hwk node-image list -o json | grep -q '"os": "windows"'; then
	echo "no Windows node image: making a Linux-only cluster on the docker driver (hwk up --windows-workers 0 --driver docker)"
	args="--windows-workers 0 --driver docker"
fi
# shellcheck disable=SC2086
exec $hwk up $args "$@"
