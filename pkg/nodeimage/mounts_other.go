//go:build !linux

package nodeimage

import "os"

// removeWork removes a build's work directory. Only a Linux build mounts
// anything in it (debootstrap), and only a Linux host runs one.
func removeWork(dir string) error { return os.RemoveAll(dir) }
