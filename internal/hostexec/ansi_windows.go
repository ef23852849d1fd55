package hostexec

import (
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/sys/windows"
)

// The code pages MultiByteToWideChar names (WinNls.h).
const (
	cpACP  = 0
	cpUTF8 = 65001
)

// FromANSI returns a program's output as text: as it is when it is
// UTF-8, else decoded from the ANSI code page (GetACP), which programs
// such as VBoxManage use when their output is a pipe.
func FromANSI(b []byte) string {
	if utf8.Valid(b) || windows.GetACP() == cpUTF8 {
		return string(b)
	}
	n, err := windows.MultiByteToWideChar(cpACP, 0, &b[0], int32(len(b)), nil, 0)
	if err != nil || n <= 0 {
		return string(b)
	}
	u := make([]uint16, n)
	if _, err := windows.MultiByteToWideChar(cpACP, 0, &b[0], int32(len(b)), &u[0], n); err != nil {
		return string(b)
	}
	return string(utf16.Decode(u))
}
