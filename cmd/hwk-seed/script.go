package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/internal/powershell"
)

// runEncoded runs script in program (Windows PowerShell) as an encoded
// command. Its output goes to out as it comes. Its stderr, which Windows
// PowerShell writes as CLIXML to a pipe, goes to errOut decoded once the
// script has ended, and a failure carries the error's message.
func runEncoded(program, script string, out, errOut io.Writer) error {
	var stderr bytes.Buffer
	cmd := hostexec.Command(context.Background(), program, powershell.Args(script)...)
	cmd.Stdout, cmd.Stderr = out, &stderr
	err := cmd.Run()
	if _, werr := io.WriteString(errOut, powershell.DecodeCLIXML(stderr.String())); werr != nil && err == nil {
		err = werr
	}
	if err == nil {
		return nil
	}
	msg := powershell.ErrorText(stderr.String())
	if lines := strings.Split(msg, "\n"); len(lines) > 3 {
		msg = strings.Join(lines[len(lines)-3:], "\n")
	}
	if msg == "" {
		return fmt.Errorf("%s: %w", program, err)
	}
	return fmt.Errorf("%s: %w: %s", program, err, msg)
}
