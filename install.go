// Package hwk holds what sits at the repository's root for users who
// install hwk without Go: the install scripts, embedded so that hwk's
// tests check the very files the README tells people to run.
package hwk

import "embed"

// Installers are install.sh (Linux, macOS) and install.ps1 (Windows).
//
//go:embed install.sh install.ps1
var Installers embed.FS
