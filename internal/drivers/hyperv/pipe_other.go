//go:build !windows

package hyperv

import "io"

// openNamedPipe has no pipe to open off Windows, where Install cannot get
// as far as starting a VM.
func openNamedPipe(string) (io.ReadCloser, error) { return nil, errNoPipes }
