package doctor

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/hwk-dev/hwk/internal/hostmem"
)

func platform(p *Probes) {
	p.OS = "darwin"
	p.Virtualization = func(context.Context) (Virtualization, error) {
		v, err := unix.SysctlUint32("kern.hv_support")
		if err != nil {
			return Virtualization{}, err
		}
		if v == 1 {
			return Virtualization{Enabled: true, Detail: "Hypervisor.framework: kern.hv_support is 1"}, nil
		}
		return Virtualization{Detail: "kern.hv_support is 0: no Hypervisor.framework"}, nil
	}
	p.Memory = func(context.Context) (uint64, uint64, error) { return hostmem.Read() }
	p.DiskFree = statfsFree
	p.VirtualBox = func() string { return "" }
}
