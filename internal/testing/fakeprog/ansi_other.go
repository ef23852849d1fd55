//go:build !windows

package fakeprog

// toANSI is s as a program writes it where there is no ANSI code page:
// UTF-8.
func toANSI(s string) []byte { return []byte(s) }
