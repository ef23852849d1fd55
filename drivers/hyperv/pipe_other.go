//go:build !windows

package hyperv

import "context"

// followPipe has no pipe to follow off Windows, where Install cannot get
// as far as starting a VM.
func followPipe(context.Context, string, string) func() { return func() {} }
