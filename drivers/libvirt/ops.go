package libvirt

import (
	"context"
	"errors"
	"fmt"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
)

// isCode reports whether err is libvirt's error code.
func isCode(err error, code golibvirt.ErrorNumber) bool {
	var e golibvirt.Error
	return errors.As(err, &e) && e.Code == uint32(code)
}

// ensureNetwork defines and starts the network xml describes, or starts
// it if it is defined but inactive.
func ensureNetwork(l *golibvirt.Libvirt, name, xml string) error {
	nw, err := l.NetworkLookupByName(name)
	if isCode(err, golibvirt.ErrNoNetwork) {
		if nw, err = l.NetworkDefineXML(xml); err != nil {
			return fmt.Errorf("define network %s: %w", name, err)
		}
	} else if err != nil {
		return fmt.Errorf("look up network %s: %w", name, err)
	}
	active, err := l.NetworkIsActive(nw)
	if err != nil {
		return fmt.Errorf("network %s: %w", name, err)
	}
	if active == 0 {
		if err := l.NetworkCreate(nw); err != nil {
			return fmt.Errorf("start network %s: %w", name, err)
		}
	}
	return nil
}

// removeNetwork stops and undefines a network; a missing one is not an
// error.
func removeNetwork(l *golibvirt.Libvirt, name string) error {
	nw, err := l.NetworkLookupByName(name)
	if isCode(err, golibvirt.ErrNoNetwork) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up network %s: %w", name, err)
	}
	if active, err := l.NetworkIsActive(nw); err == nil && active != 0 {
		if err := l.NetworkDestroy(nw); err != nil && !isCode(err, golibvirt.ErrOperationInvalid) {
			return fmt.Errorf("stop network %s: %w", name, err)
		}
	}
	if err := l.NetworkUndefine(nw); err != nil && !isCode(err, golibvirt.ErrNoNetwork) {
		return fmt.Errorf("undefine network %s: %w", name, err)
	}
	return nil
}

// domainState is a domain's state; a missing domain is DomainNostate
// with found false.
func domainState(l *golibvirt.Libvirt, name string) (state golibvirt.DomainState, found bool, err error) {
	d, err := l.DomainLookupByName(name)
	if golibvirt.IsNotFound(err) {
		return golibvirt.DomainNostate, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("look up domain %s: %w", name, err)
	}
	s, _, err := l.DomainGetState(d, 0)
	if golibvirt.IsNotFound(err) {
		return golibvirt.DomainNostate, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("state of domain %s: %w", name, err)
	}
	return golibvirt.DomainState(s), true, nil
}

// startDomain boots a defined domain; a running one is left alone.
func startDomain(l *golibvirt.Libvirt, name string) error {
	d, err := l.DomainLookupByName(name)
	if err != nil {
		return fmt.Errorf("look up domain %s: %w", name, err)
	}
	s, _, err := l.DomainGetState(d, 0)
	if err != nil {
		return fmt.Errorf("state of domain %s: %w", name, err)
	}
	if golibvirt.DomainState(s) == golibvirt.DomainRunning {
		return nil
	}
	if err := l.DomainCreate(d); err != nil {
		return fmt.Errorf("start domain %s: %w", name, err)
	}
	return nil
}

// stopDomain asks the guest to shut down (ACPI) and waits up to grace
// for it to stop, then pulls the plug. A stopped or missing domain is
// left alone.
func stopDomain(ctx context.Context, l *golibvirt.Libvirt, name string, grace time.Duration) error {
	state, found, err := domainState(l, name)
	if err != nil || !found || state == golibvirt.DomainShutoff {
		return err
	}
	d, err := l.DomainLookupByName(name)
	if err != nil {
		return fmt.Errorf("look up domain %s: %w", name, err)
	}
	if err := l.DomainShutdown(d); err != nil && !isCode(err, golibvirt.ErrOperationInvalid) {
		return fmt.Errorf("shut down domain %s: %w", name, err)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if state, found, err := domainState(l, name); err != nil || !found || state == golibvirt.DomainShutoff {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	if err := l.DomainDestroy(d); err != nil && !isCode(err, golibvirt.ErrOperationInvalid) && !golibvirt.IsNotFound(err) {
		return fmt.Errorf("power off domain %s: %w", name, err)
	}
	return nil
}

// removeDomain powers a domain off and undefines it with its UEFI
// variables; a missing domain is not an error.
func removeDomain(l *golibvirt.Libvirt, name string) error {
	d, err := l.DomainLookupByName(name)
	if golibvirt.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up domain %s: %w", name, err)
	}
	if s, _, err := l.DomainGetState(d, 0); err == nil && golibvirt.DomainState(s) != golibvirt.DomainShutoff {
		if err := l.DomainDestroy(d); err != nil && !isCode(err, golibvirt.ErrOperationInvalid) && !golibvirt.IsNotFound(err) {
			return fmt.Errorf("power off domain %s: %w", name, err)
		}
	}
	err = l.DomainUndefineFlags(d, golibvirt.DomainUndefineNvram)
	if isCode(err, golibvirt.ErrInvalidArg) {
		// Drivers without UEFI variables (libvirt's test driver) refuse
		// the flag.
		err = l.DomainUndefineFlags(d, 0)
	}
	if err != nil && !golibvirt.IsNotFound(err) {
		return fmt.Errorf("undefine domain %s: %w", name, err)
	}
	return nil
}
