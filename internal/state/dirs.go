// Package state is hwk's on-disk state: where files live, the per-cluster
// directories, atomic writes, and the per-cluster lock that keeps two hwk
// commands from working on one cluster at once.
package state

import (
	"os"
	"path/filepath"

	"github.com/adrg/xdg"
)

// HomeEnv moves every hwk directory under one root (for tests, or to keep
// hwk's files on another disk).
const HomeEnv = "HWK_HOME"

// Dirs are the roots of everything hwk writes.
type Dirs struct {
	// Config holds user settings (~/.config/hwk).
	Config string
	// Data holds per-cluster state: keys, disks, logs (~/.local/share/hwk).
	Data string
	// Cache holds node images and downloads, shared by clusters
	// (~/.cache/hwk).
	Cache string
}

// DefaultDirs follows XDG (adrg/xdg also knows the Windows and macOS
// equivalents) unless HWK_HOME is set, in which case everything goes under
// it. The environment is read on every call, so a test that sets HWK_HOME
// or XDG_* after start-up is honoured.
func DefaultDirs() Dirs {
	if home := os.Getenv(HomeEnv); home != "" {
		return Dirs{
			Config: filepath.Join(home, "config"),
			Data:   filepath.Join(home, "data"),
			Cache:  filepath.Join(home, "cache"),
		}
	}
	xdg.Reload()
	return Dirs{
		Config: filepath.Join(xdg.ConfigHome, "hwk"),
		Data:   filepath.Join(xdg.DataHome, "hwk"),
		Cache:  filepath.Join(xdg.CacheHome, "hwk"),
	}
}
