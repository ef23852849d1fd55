package fakeprog

import (
	"unicode/utf16"
	"unsafe"

	"golang.org/x/sys/windows"
)

// ToANSI is s in the ANSI code page (WideCharToMultiByte with CP_ACP,
// which x/sys/windows does not wrap); a letter the code page lacks
// becomes "?", as Windows writes it.
func ToANSI(s string) []byte {
	if s == "" {
		return nil
	}
	u := utf16.Encode([]rune(s))
	b := make([]byte, 4*len(u))
	n, _, _ := wideCharToMultiByte.Call(0, 0, uintptr(unsafe.Pointer(&u[0])), uintptr(len(u)), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0)
	return b[:n]
}

var wideCharToMultiByte = windows.NewLazySystemDLL("kernel32.dll").NewProc("WideCharToMultiByte")
