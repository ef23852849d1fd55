// Package images holds the recipes and pins for the container images a
// cluster runs: which images a Linux node carries preloaded and how each is
// made from binaries when hwk builds them from source.
package images

import "embed"

// Recipe is linux.yaml, userland.sh and the pause source.
//
//go:embed linux.yaml userland.sh pause
var Recipe embed.FS
