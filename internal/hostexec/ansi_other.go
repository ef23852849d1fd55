//go:build !windows

package hostexec

// FromANSI returns a program's output as text. Only Windows has an ANSI
// code page; elsewhere output is taken as it is.
func FromANSI(b []byte) string { return string(b) }
