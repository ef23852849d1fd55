package images

import "embed"

// Manifests are the Kubernetes manifests hwk applies to a cluster, each
// with its source and version in its header, and windows.yaml, the images
// they make Windows nodes run. They are apart from Recipe so that editing
// one does not change the node image's cache key.
//
//go:embed manifests windows.yaml
var Manifests embed.FS
