package libvirt

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// FuzzRoutes checks the host's routes read from /proc/net/route, or refused:
// no more than its lines after the header, each an IPv4 prefix with its host
// bits clear on an interface named in one word; written back in the kernel's
// format, they read back the same. The seed is the table of TestParseRoutes;
// under `go test` the target runs on the seeds alone.
func FuzzRoutes(f *testing.F) {
	f.Add([]byte(procRoutes))
	f.Add([]byte("head\neth0 XYZ 0 0 0 0 0 00FFFFFF\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := parseRoutes(strings.NewReader(string(data)))
		if err != nil {
			if rs != nil {
				t.Errorf("routes and an error: %v %v", rs, err)
			}
			return
		}
		if len(rs) > strings.Count(string(data), "\n") {
			t.Errorf("%d routes from %d lines after the header", len(rs), strings.Count(string(data), "\n"))
		}
		var b strings.Builder
		b.WriteString("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n")
		for _, r := range rs {
			if !r.Dst.IsValid() || !r.Dst.Addr().Is4() || r.Dst != r.Dst.Masked() || r.Iface == "" || strings.ContainsFunc(r.Iface, unicode.IsSpace) {
				t.Errorf("route %+v", r)
			}
			dst := r.Dst.Addr().As4()
			mask := ^uint32(0) << (32 - r.Dst.Bits())
			if r.Dst.Bits() == 0 {
				mask = 0
			}
			// The kernel writes both in host order, little-endian here.
			fmt.Fprintf(&b, "%s\t%08X\t00000000\t0001\t0\t0\t0\t%08X\t0\t0\t0\n", r.Iface,
				binary.LittleEndian.Uint32(dst[:]), binary.LittleEndian.Uint32(binary.BigEndian.AppendUint32(nil, mask)))
		}
		back, err := parseRoutes(strings.NewReader(b.String()))
		if err != nil || !slices.Equal(back, rs) {
			t.Errorf("%v written as %q read back as %v %v", rs, b.String(), back, err)
		}
	})
}
