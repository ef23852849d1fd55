//go:build !windows

package hyperv

import "io"

// openNamedPipe returns errNoPipes: off Windows, Install cannot get as far
// as starting a VM.
func openNamedPipe(string) (io.ReadCloser, error) { return nil, errNoPipes }
