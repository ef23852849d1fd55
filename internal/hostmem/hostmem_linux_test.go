package hostmem

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMeminfo checks that meminfo reads /proc/meminfo's format (proc(5)),
// and that a file without MemTotal is an error.
func TestMeminfo(t *testing.T) {
	mem := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(mem, []byte("MemTotal:       24604008 kB\nMemFree:         1190852 kB\nMemAvailable:   23729772 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if total, avail, err := meminfo(mem); err != nil || total != 24604008<<10 || avail != 23729772<<10 {
		t.Errorf("meminfo: %d %d %v", total, avail, err)
	}
	if err := os.WriteFile(mem, []byte("MemFree: 1 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := meminfo(mem); err == nil {
		t.Error("a file without MemTotal was read")
	}
}
