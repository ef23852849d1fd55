package doctor

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/hwk-dev/hwk/internal/hostmem"
)

func platform(p *Probes) {
	p.OS = "linux"
	p.Virtualization = func(context.Context) (Virtualization, error) { return linuxVirtualization("/proc/cpuinfo", "/dev/kvm") }
	p.Memory = func(context.Context) (uint64, uint64, error) { return hostmem.Read() }
	p.DiskFree = statfsFree
	p.VirtualBox = func() string { return "" }
}

// linuxVirtualization reports whether KVM can run, from the CPU's vmx
// (Intel) or svm (AMD) flag in cpuinfo and the device kvm (/dev/kvm),
// which the kvm module makes once the firmware has it on.
func linuxVirtualization(cpuinfo, kvm string) (Virtualization, error) {
	data, err := os.ReadFile(cpuinfo)
	if err != nil {
		return Virtualization{}, err
	}
	flag := ""
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			for _, f := range strings.Fields(v) {
				if f == "vmx" || f == "svm" {
					flag = f
				}
			}
			break
		}
	}
	_, kerr := os.Stat(kvm)
	switch {
	case flag != "" && kerr == nil:
		return Virtualization{Enabled: true, Detail: fmt.Sprintf("KVM: %s, the CPU has %s", kvm, flag)}, nil
	case flag != "":
		return Virtualization{Detail: fmt.Sprintf("the CPU has %s but there is no %s (%v): the kvm module is not loaded, or the firmware has virtualization off", flag, kvm, kerr)}, nil
	case kerr == nil:
		return Virtualization{Enabled: true, Detail: fmt.Sprintf("KVM: %s", kvm)}, nil
	}
	return Virtualization{Detail: fmt.Sprintf("the CPU shows neither vmx nor svm and there is no %s: no hardware virtualization (VMs would be emulated, many times slower)", kvm)}, nil
}
