// Package version is what this hwk binary is: its release and commit, set
// at link time by the Makefile, and the Go toolchain and platform.
package version

import (
	"runtime"
	"runtime/debug"
)

// Set with -ldflags "-X github.com/hwk-dev/hwk/pkg/version.Version=...".
var (
	Version = "v0.0.0-dev"
	Commit  = ""
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the running binary's Info. Without a commit from the linker
// it falls back to what the Go toolchain stamped (go install from a
// checkout), then to "unknown".
func Get() Info {
	commit := Commit
	if commit == "" {
		commit = "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					commit = s.Value
				}
			}
		}
	}
	return Info{
		Version:   Version,
		Commit:    commit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}
