// Package images holds the recipes and pins for the container images a
// cluster runs: which images a Linux node carries preloaded and how each is
// made from binaries when hwk builds them from source.
package images

import "embed"

// Recipe is linux.yaml, the userland's Debian lock and stage-2 script
// (userland.sh), and the pause source.
//
//go:embed linux.yaml userland.lock.yaml userland.sh pause
var Recipe embed.FS
