//go:build !windows

package fakeprog

// ToANSI is s as a program writes it where there is no ANSI code page:
// UTF-8.
func ToANSI(s string) []byte { return []byte(s) }
