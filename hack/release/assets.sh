#!/usr/bin/env bash
# Prints, one a line, every file of dist/ a release uploads: what
# goreleaser's dist/artifacts.json lists as an archive, checksums.txt, an
# SBOM, the Scoop manifest or a winget manifest. The release workflow's
# upload step passes exactly this list to `gh release create`, and
# hack/release's test checks the same list, so the two cannot disagree.
# The manifests go up too (goreleaser's own upload leaves them out), so
# that what is submitted to Scoop and winget is the file the release shows.
#
# Run it where goreleaser ran (the repository's root): artifacts.json's
# paths start with dist/ and are relative to there.
set -euo pipefail
[ -f dist/artifacts.json ] || { echo "$0: no dist/artifacts.json here: build the release first (make release-build)" >&2; exit 1; }
jq -r '.[] | select(.type == "Archive" or .type == "Checksum" or .type == "SBOM"
	or .type == "Scoop Manifest" or .type == "Winget Manifest") | .path' dist/artifacts.json | sort
