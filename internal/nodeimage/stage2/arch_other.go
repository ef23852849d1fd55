//go:build !windows

package stage2

import "runtime"

// nativeAMD64 reports whether the machine is amd64 (see arch_windows.go).
func nativeAMD64() bool { return runtime.GOARCH == "amd64" }
