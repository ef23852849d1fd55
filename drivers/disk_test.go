package drivers

import (
	"strings"
	"testing"
)

// TestDiskSize checks that a disk at least the image's size is made as
// asked, and a smaller one stays at the image's size, with a warning that
// names both.
func TestDiskSize(t *testing.T) {
	for _, c := range []struct {
		disk, image, want int64
		warn              string
	}{
		{64 << 30, 40 << 30, 64 << 30, ""},
		{20 << 30, 20 << 30, 20 << 30, ""},
		{10 << 30, 20 << 30, 20 << 30, "node n1: its disk stays at the node image's 20 GiB; nodes[].disk asks for 10 GiB"},
		{512 << 20, 20 << 30, 20 << 30, "asks for 0.5 GiB"},
	} {
		got, warn := DiskSize("n1", c.disk, c.image)
		if got != c.want || (c.warn == "") != (warn == "") || !strings.Contains(warn, c.warn) {
			t.Errorf("DiskSize(%d, %d) = %d, %q; want %d, %q", c.disk, c.image, got, warn, c.want, c.warn)
		}
	}
}
