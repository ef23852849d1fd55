#!/bin/sh
# release-reachable.sh KUBERNETES_VERSION: whether a `hwk node-image build
# linux --source release` can start here. It probes the first downloads
# such a build makes (Kubernetes' from dl.k8s.io, the other components'
# from GitHub) with a HEAD request of at most 10 seconds each; exits 0
# when they answer, else prints the first that did not and exits 1.
#
# A release build takes minutes and a source build tens of minutes, so
# callers (action/nodeimage.sh, hack/up.sh) build from release downloads
# when they answer; when they do not, a release build would only fail
# after its own timeouts. HWK_RELEASE_PROBE_URLS replaces the URLs (tests).
set -eu

version=$1
case $(uname -m) in
aarch64 | arm64) arch=arm64 ;;
*) arch=amd64 ;;
esac
for url in ${HWK_RELEASE_PROBE_URLS:-https://dl.k8s.io/release/$version/bin/linux/$arch/kubeadm.sha256 https://github.com/containerd/containerd/releases}; do
	if ! curl -fsSIL --max-time 10 -o /dev/null "$url" 2>/dev/null; then
		echo "$url did not answer"
		exit 1
	fi
done
