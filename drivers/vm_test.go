package drivers

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

func TestCheckVM(t *testing.T) {
	r := VMRules{Driver: "hyperv", Hypervisor: "Hyper-V", Guests: []config.OS{config.Linux, config.Windows}, ImageFormat: "a VHDX disk", MinMemory: 512 << 20}
	good := MachineSpec{Ref: Ref{Name: "n1"}, OS: config.Linux, IP: netip.MustParseAddr("172.31.250.10"), Image: "disk.vhdx", CPUs: 2, MemoryBytes: 2 << 30}
	if err := CheckVM(good, r); err != nil {
		t.Fatal(err)
	}
	for want, change := range map[string]func(*MachineSpec){
		`node n1: the hyperv driver cannot run "plan9" nodes`:            func(s *MachineSpec) { s.OS = "plan9" },
		`node n1: Hyper-V nodes need an IPv4 address, not "::1"`:         func(s *MachineSpec) { s.IP = netip.MustParseAddr("::1") },
		"node n1: no node image (a VHDX disk) given":                     func(s *MachineSpec) { s.Image = "" },
		"node n1: 2 CPUs and 256 MiB of memory is too little for a node": func(s *MachineSpec) { s.MemoryBytes = 256 << 20 },
		"node n1: 0 CPUs and 2048 MiB of memory is too little":           func(s *MachineSpec) { s.CPUs = 0 },
	} {
		s := good
		change(&s)
		if err := CheckVM(s, r); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v; want %q", err, want)
		}
	}
}

type inspector map[string]Machine

func (i inspector) Inspect(_ context.Context, r Ref) (Machine, error) {
	if m, ok := i[r.Name]; ok {
		return m, nil
	}
	return Machine{Ref: r, State: StateMissing}, nil
}

func TestOwnAddress(t *testing.T) {
	d := inspector{"cp": {State: StateRunning, IP: netip.MustParseAddr("172.31.250.10")}}
	got, err := OwnAddress(context.Background(), d, Ref{Cluster: "hwk", Name: "cp"}, 6443, "Hyper-V VM")
	if err != nil || got.String() != "172.31.250.10:6443" {
		t.Errorf("%v, %v", got, err)
	}
	if _, err := OwnAddress(context.Background(), d, Ref{Cluster: "hwk", Name: "w1"}, 6443, "Hyper-V VM"); err == nil || err.Error() != "node w1 of cluster hwk has no Hyper-V VM" {
		t.Errorf("missing node: %v", err)
	}
}
