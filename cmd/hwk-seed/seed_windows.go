package main

import (
	"encoding/base64"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"unicode/utf16"

	"golang.org/x/sys/windows"
)

// findSeed is the root of the volume labelled cidata (D:\, E:\, ...).
func findSeed() (string, error) {
	mask, err := windows.GetLogicalDrives()
	if err != nil {
		return "", err
	}
	for i := 0; i < 26; i++ {
		if mask&(1<<i) == 0 {
			continue
		}
		root := string(rune('A'+i)) + `:\`
		label := make([]uint16, windows.MAX_PATH+1)
		p, _ := windows.UTF16PtrFromString(root)
		if windows.GetVolumeInformation(p, &label[0], uint32(len(label)), nil, nil, nil, nil, 0) != nil {
			continue // an empty drive, a disconnected share
		}
		if strings.EqualFold(windows.UTF16ToString(label), "cidata") {
			return root, nil
		}
	}
	return "", errors.New("no disk labelled cidata: this machine has no hwk seed (was it started by hwk?)")
}

// runScript runs the script in Windows PowerShell, encoded so that no
// quoting layer touches it.
func runScript(script string, out io.Writer) error {
	u := utf16.Encode([]rune(script))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		b[2*i], b[2*i+1] = byte(c), byte(c>>8)
	}
	cmd := exec.Command("powershell.exe", "-NoLogo", "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass",
		"-EncodedCommand", base64.StdEncoding.EncodeToString(b))
	cmd.Stdout, cmd.Stderr = out, os.Stderr
	return cmd.Run()
}
