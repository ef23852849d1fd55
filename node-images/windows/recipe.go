// Package windows holds the recipe for hwk's Windows node image: the
// unattended-install answer file's template, the provisioning script the
// build runs in the guest, the Windows binaries it installs
// (components.yaml) and the wrapper modules only Windows needs (modules/).
// internal/nodeimage/winimage renders the files; internal/nodeimage/build
// runs the build.
package windows

import "embed"

// Recipe is the recipe's files. All of them are inputs of the image's
// cache key.
//
//go:embed autounattend.xml.tmpl provision.ps1 components.yaml modules
var Recipe embed.FS
