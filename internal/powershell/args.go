// Package powershell is how hwk hands a script to Windows PowerShell: as
// powershell.exe's -EncodedCommand (base64 of UTF-16LE), so that no
// quoting layer between hwk and it (SSH, cmd.exe, a scheduled task) can
// mangle the script. It is the one place both hwk's node handle and
// hwk-seed.exe encode, and fakes of powershell.exe decode; and where the
// CLIXML that such a run writes to a redirected stderr becomes text
// (clixml.go).
package powershell

import (
	"encoding/base64"
	"unicode/utf16"
)

// Args returns powershell.exe's arguments that run script.
func Args(script string) []string {
	u := utf16.Encode([]rune(script))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		b[2*i], b[2*i+1] = byte(c), byte(c>>8)
	}
	return []string{"-NoLogo", "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass",
		"-EncodedCommand", base64.StdEncoding.EncodeToString(b)}
}

// Script returns the script powershell.exe's arguments args run with
// -EncodedCommand last; ok is false for any other arguments.
func Script(args []string) (script string, ok bool) {
	if len(args) < 2 || args[len(args)-2] != "-EncodedCommand" {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(args[len(args)-1])
	if err != nil || len(raw)%2 != 0 {
		return "", false
	}
	u := make([]uint16, len(raw)/2)
	for i := range u {
		u[i] = uint16(raw[2*i]) | uint16(raw[2*i+1])<<8
	}
	return string(utf16.Decode(u)), true
}
