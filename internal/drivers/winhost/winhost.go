// Package winhost reports where hwk runs relative to Windows, for the
// drivers that drive Windows' own tools (Hyper-V, WSL2).
package winhost

import "os"

// InWSL reports whether this process runs in a WSL distribution: WSL
// starts its processes with WSL_DISTRO_NAME and WSL_INTEROP set, and
// registers the WSLInterop binfmt entry that runs Windows programs
// (https://wsl.dev/technical-documentation/interop). Windows' programs
// are then on PATH, but would be handed Linux paths.
func InWSL() bool {
	if os.Getenv("WSL_DISTRO_NAME") != "" || os.Getenv("WSL_INTEROP") != "" {
		return true
	}
	_, err := os.Stat("/proc/sys/fs/binfmt_misc/WSLInterop")
	return err == nil
}
