package libvirt

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"
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

// setDHCPHost adds (or, with add false, removes) the network's DHCP
// reservation for h, in the running network and its definition. Adding
// what is there, or removing what is not, changes nothing; a reservation
// of the same name, MAC or address is replaced.
func setDHCPHost(l *golibvirt.Libvirt, network string, h dhcpHost, add bool) error {
	nw, err := l.NetworkLookupByName(network)
	if isCode(err, golibvirt.ErrNoNetwork) && !add {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up network %s: %w", network, err)
	}
	raw, err := l.NetworkGetXMLDesc(nw, 0)
	if err != nil {
		return fmt.Errorf("read network %s: %w", network, err)
	}
	var def libvirtxml.Network
	if err := def.Unmarshal(raw); err != nil {
		return fmt.Errorf("read network %s: %w", network, err)
	}
	flags := golibvirt.NetworkUpdateAffectConfig
	if active, err := l.NetworkIsActive(nw); err == nil && active != 0 {
		flags |= golibvirt.NetworkUpdateAffectLive
	}
	var want libvirtxml.NetworkDHCPHost
	if add {
		want = libvirtxml.NetworkDHCPHost{MAC: MAC(h.IP), Name: h.Name, IP: h.IP.String()}
	}
	for _, ip := range def.IPs {
		if ip.DHCP == nil {
			continue
		}
		for _, have := range ip.DHCP.Hosts {
			if add && have.MAC == want.MAC && have.Name == want.Name && have.IP == want.IP {
				return nil
			}
			if have.Name != h.Name && (!add || (have.MAC != want.MAC && have.IP != want.IP)) {
				continue
			}
			if err := updateDHCPHost(l, nw, golibvirt.NetworkUpdateCommandDelete, have, flags); err != nil {
				return err
			}
		}
	}
	if !add {
		return nil
	}
	return updateDHCPHost(l, nw, golibvirt.NetworkUpdateCommandAddLast, want, flags)
}

func updateDHCPHost(l *golibvirt.Libvirt, nw golibvirt.Network, cmd golibvirt.NetworkUpdateCommand, h libvirtxml.NetworkDHCPHost, flags golibvirt.NetworkUpdateFlags) error {
	x, err := xml.Marshal(h)
	if err != nil {
		return err
	}
	// The struct's element is <host>, as the update wants it.
	if err := l.NetworkUpdateCompat(nw, cmd, golibvirt.NetworkSectionIPDhcpHost, -1, string(x), flags); err != nil {
		verb := "add"
		if cmd == golibvirt.NetworkUpdateCommandDelete {
			verb = "remove"
		}
		return fmt.Errorf("%s the DHCP reservation of %s (%s, %s) on network %s: %w", verb, h.Name, h.MAC, h.IP, nw.Name, err)
	}
	return nil
}
