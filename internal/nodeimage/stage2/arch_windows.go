package stage2

import (
	"debug/pe"
	"runtime"

	"golang.org/x/sys/windows"
)

// nativeAMD64 reports whether the machine is amd64, not only this
// program: an amd64 hwk.exe also runs, emulated, on an arm64 Windows,
// whose WSL kernel is arm64 and cannot run an amd64 root.
func nativeAMD64() bool {
	// IsWow64Process2 came with Windows 10 1709; x/sys would panic on a
	// Windows without it.
	if windows.NewLazySystemDLL("kernel32.dll").NewProc("IsWow64Process2").Find() != nil {
		return runtime.GOARCH == "amd64"
	}
	var process, native uint16
	if err := windows.IsWow64Process2(windows.CurrentProcess(), &process, &native); err != nil {
		return runtime.GOARCH == "amd64"
	}
	return native == pe.IMAGE_FILE_MACHINE_AMD64
}
