// Package linux holds the recipe for hwk's Linux node image: the Debian
// packages, the files laid over the rootfs, the scripts that build the rootfs
// and the bootable disk, and the wrapper modules that build every binary from
// source. internal/nodeimage/build runs it.
package linux

import "embed"

// Recipe is this directory: components.yaml, the scripts, files/ and
// modules/. Everything in it is an input of the image's cache key, so a
// change to any file here makes the next build a new image.
//
//go:embed components.yaml debian.lock.yaml *.sh files modules
var Recipe embed.FS
