//go:build !linux && !windows && !darwin

package doctor

import (
	"context"
	"errors"
	"runtime"
)

// platform sets p's probes for an OS hwk has no drivers for: every host
// probe fails, naming the OS.
func platform(p *Probes) {
	p.OS = runtime.GOOS
	unsupported := errors.New("hwk cannot probe " + runtime.GOOS)
	p.Virtualization = func(context.Context) (Virtualization, error) { return Virtualization{}, unsupported }
	p.Memory = func(context.Context) (uint64, uint64, error) { return 0, 0, unsupported }
	p.DiskFree = func(string) (uint64, error) { return 0, unsupported }
	p.VirtualBox = func() string { return "" }
}
