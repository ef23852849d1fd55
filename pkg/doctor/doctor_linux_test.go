package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinuxProbes: the real Linux probes' parsers, on the formats of
// /proc/cpuinfo and /proc/meminfo (proc(5)).
func TestLinuxProbes(t *testing.T) {
	dir := t.TempDir()
	cpu := filepath.Join(dir, "cpuinfo")
	os.WriteFile(cpu, []byte("processor\t: 0\nflags\t\t: fpu vme de pse tsc msr vmx ssse3\n\nprocessor\t: 1\nflags\t\t: fpu vmx\n"), 0o644)
	kvm := filepath.Join(dir, "kvm")
	if v, _ := linuxVirtualization(cpu, kvm); v.Enabled || !strings.Contains(v.Detail, "has vmx but there is no") {
		t.Errorf("vmx without /dev/kvm: %+v", v)
	}
	os.WriteFile(kvm, nil, 0o600)
	if v, _ := linuxVirtualization(cpu, kvm); !v.Enabled {
		t.Errorf("vmx with /dev/kvm: %+v", v)
	}
	mem := filepath.Join(dir, "meminfo")
	os.WriteFile(mem, []byte("MemTotal:       24604008 kB\nMemFree:         1190852 kB\nMemAvailable:   23729772 kB\n"), 0o644)
	if total, avail, err := meminfo(mem); err != nil || total != 24604008<<10 || avail != 23729772<<10 {
		t.Errorf("meminfo: %d %d %v", total, avail, err)
	}
}
