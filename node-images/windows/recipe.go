// Package windows holds the recipe for hwk's Windows node image: the
// unattended-install answer file's template and the provisioning scripts
// the build runs in the guest. pkg/winimage renders and ships them.
package windows

import "embed"

// Recipe is the recipe's files.
//
//go:embed autounattend.xml.tmpl sysprep-unattend.xml.tmpl provision.ps1
var Recipe embed.FS
