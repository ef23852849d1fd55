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

// RootFilesRecord is where a Linux node's root lists the files it carries
// from its images (node-images/linux/components.yaml's fromImages), one
// line each: the image's reference, a space, the file's path in the root
// (no leading slash). A node made from an older image has no such file.
const RootFilesRecord = "usr/share/hwk/image-files"
