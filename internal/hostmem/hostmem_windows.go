package hostmem

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

// memoryStatusEx is MEMORYSTATUSEX (sysinfoapi.h).
type memoryStatusEx struct {
	length, memoryLoad           uint32
	totalPhys, availPhys         uint64
	totalPageFile, availPageFile uint64
	totalVirtual, availVirtual   uint64
	availExtendedVirtual         uint64
}

var globalMemoryStatusEx = windows.NewLazySystemDLL("kernel32.dll").NewProc("GlobalMemoryStatusEx")

// read returns GlobalMemoryStatusEx's total and ullAvailPhys, what Task
// Manager shows as Available (free and standby pages), which Hyper-V can
// give a starting VM.
func read() (uint64, uint64, error) {
	s := memoryStatusEx{length: uint32(unsafe.Sizeof(memoryStatusEx{}))}
	if r, _, err := globalMemoryStatusEx.Call(uintptr(unsafe.Pointer(&s))); r == 0 {
		return 0, 0, err
	}
	return s.totalPhys, s.availPhys, nil
}
