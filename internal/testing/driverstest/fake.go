// Package driverstest has a driver for tests of code that chooses or lists
// drivers: it makes nothing, and its preflight says what the test wants.
package driverstest

import (
	"context"
	"errors"
	"net/netip"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// Fake is a driver called DriverName (one of config's driver names, whose
// guest OSes it reports) that passes preflight unless Err is set.
type Fake struct {
	DriverName string
	Err        error
	// Slow makes it a drivers.Emulator that emulates.
	Slow bool
}

var errFake = errors.New("driverstest.Fake makes no machines")

// Up is a fake that passes preflight.
func Up(name string) Fake { return Fake{DriverName: name} }

// Down is a fake whose preflight fails with "NAME is not installed" and
// the fix "install NAME".
func Down(name string) Fake {
	return Fake{DriverName: name, Err: &drivers.UnavailableError{Driver: name, Reason: name + " is not installed", Fix: "install " + name}}
}

// Emulating is a fake that passes preflight but emulates the CPU.
func Emulating(name string) Fake { return Fake{DriverName: name, Slow: true} }

// ExperimentalFake is a Fake that is a drivers.Experimental.
type ExperimentalFake struct{ Fake }

// Limits implements drivers.Experimental.
func (ExperimentalFake) Limits() string { return "a fake's limits" }

// UpExperimental is an experimental fake that passes preflight.
func UpExperimental(name string) ExperimentalFake { return ExperimentalFake{Up(name)} }

// RefusingUp is a fake whose preflight passes and whose CheckUp fails
// with "NAME cannot make nodes here" and the fix "reconfigure NAME".
type RefusingUp struct{ Fake }

// CheckUp implements drivers.UpChecker.
func (f RefusingUp) CheckUp(context.Context) error {
	return &drivers.UnavailableError{Driver: f.DriverName, Reason: f.DriverName + " cannot make nodes here", Fix: "reconfigure " + f.DriverName}
}

// Emulated implements drivers.Emulator.
func (f Fake) Emulated() bool { return f.Slow }

func (f Fake) Name() string           { return f.DriverName }
func (f Fake) GuestOSes() []config.OS { return config.DriverGuests(f.DriverName) }
func (f Fake) Preflight(context.Context) (string, error) {
	if f.Err != nil {
		return "", f.Err
	}
	return f.DriverName + " 1.0", nil
}
func (Fake) EnsureNetwork(context.Context, drivers.Network) error { return errFake }
func (Fake) DeleteNetwork(context.Context, string) error          { return errFake }
func (Fake) Create(context.Context, drivers.MachineSpec) error    { return errFake }
func (Fake) Start(context.Context, drivers.Ref) error             { return errFake }
func (Fake) Stop(context.Context, drivers.Ref) error              { return errFake }
func (Fake) Delete(context.Context, drivers.Ref) error            { return errFake }
func (Fake) Inspect(context.Context, drivers.Ref) (drivers.Machine, error) {
	return drivers.Machine{}, errFake
}
func (Fake) List(context.Context, string) ([]drivers.Machine, error) { return nil, errFake }
func (Fake) Node(context.Context, drivers.Ref) (*node.Node, error)   { return nil, errFake }
func (Fake) HostEndpoint(context.Context, drivers.Ref, uint16) (netip.AddrPort, error) {
	return netip.AddrPort{}, errFake
}
