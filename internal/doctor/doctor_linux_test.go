package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinuxProbes checks the real Linux virtualization probe's parser on
// the format of /proc/cpuinfo (proc(5)).
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
}
