// Package nodeimages carries the pins of hwk's published Linux node
// images (published.yaml): per Kubernetes version, the digest of the OCI
// index `hwk up` pulls when the cache has no image. It is apart from the
// recipes in linux/ so that publishing does not change an image's cache
// key.
package nodeimages

import _ "embed"

// Published is published.yaml.
//
//go:embed published.yaml
var Published []byte
