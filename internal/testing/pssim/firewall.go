package pssim

import (
	"fmt"
	"slices"
	"strings"
)

// FirewallRule is an inbound rule of Windows Defender Firewall.
type FirewallRule struct {
	Name, DisplayName string
	Protocol          string // TCP, UDP
	LocalPort         int
	Enabled           bool
	Allow             bool
	// Profiles are the network profiles the rule applies to: Domain,
	// Private, Public.
	Profiles []string
}

var allProfiles = []string{"Domain", "Private", "Public"}

// profiles reads a -Profile argument (Any, or a list of Domain, Private,
// Public, given as an array or "Domain, Private" as the cmdlets print it).
func profiles(v any) ([]string, error) {
	var out []string
	for _, x := range asList(v) {
		for p := range strings.SplitSeq(str(x), ",") {
			p = strings.TrimSpace(p)
			switch {
			case strings.EqualFold(p, "Any"):
				return slices.Clone(allProfiles), nil
			case slices.ContainsFunc(allProfiles, func(a string) bool { return strings.EqualFold(a, p) }):
				out = append(out, strings.ToUpper(p[:1])+strings.ToLower(p[1:]))
			default:
				return nil, winErr("Cannot bind parameter 'Profile'. Cannot convert value \"%s\" to type \"Microsoft.PowerShell.Cmdletization.GeneratedTypes.NetSecurity.Profile\".", p)
			}
		}
	}
	return out, nil
}

// newFirewallRule is New-NetFirewallRule: an inbound rule, enabled and
// for every profile unless told otherwise (its -Enabled and -Profile
// defaults, learn.microsoft.com/powershell/module/netsecurity/new-netfirewallrule).
func (m *Machine) newFirewallRule(c *call) (any, error) {
	r := &FirewallRule{Name: c.Str("Name"), DisplayName: c.Str("DisplayName"), Protocol: strings.ToUpper(c.Str("Protocol")),
		LocalPort: toInt(c.Arg("LocalPort")), Enabled: true, Allow: !strings.EqualFold(c.Str("Action"), "Block"), Profiles: slices.Clone(allProfiles)}
	if err := r.set(c); err != nil {
		return nil, err
	}
	if r.Name == "" {
		r.Name = r.DisplayName
	}
	if _, ok := m.Firewall[strings.ToLower(r.Name)]; ok {
		return nil, winErr("Cannot create a file when that file already exists.")
	}
	m.Firewall[strings.ToLower(r.Name)] = r
	return nil, nil
}

func (m *Machine) firewallRule(c *call) (*FirewallRule, error) {
	r := m.Firewall[strings.ToLower(c.Str("Name"))]
	if r == nil {
		return nil, nonTerminating{fmt.Sprintf("No MSFT_NetFirewallRule objects found with property 'Name' equal to '%s'.  Verify the value of the property and retry.", c.Str("Name"))}
	}
	return r, nil
}

// getFirewallRule is Get-NetFirewallRule -Name: Enabled as the cmdlet's
// enum prints (True, False), Profile as "Domain, Private" or Any.
func (m *Machine) getFirewallRule(c *call) (any, error) {
	r, err := m.firewallRule(c)
	if err != nil {
		return nil, err
	}
	profile := strings.Join(r.Profiles, ", ")
	if len(r.Profiles) == len(allProfiles) {
		profile = "Any"
	}
	return newObject("FirewallRule", "Name", r.Name, "DisplayName", r.DisplayName, "Enabled", fmt.Sprint(r.Enabled), "Profile", profile), nil
}

// setFirewallRule is Set-NetFirewallRule -Name with -Enabled, -Profile.
func (m *Machine) setFirewallRule(c *call) (any, error) {
	r, err := m.firewallRule(c)
	if err != nil {
		return nil, err
	}
	if err := r.set(c); err != nil {
		return nil, err
	}
	return nil, nil
}

// set applies a rule cmdlet's -Enabled and -Profile.
func (r *FirewallRule) set(c *call) error {
	if c.Has("Enabled") {
		r.Enabled = strings.EqualFold(c.Str("Enabled"), "True")
	}
	if c.Has("Profile") {
		p, err := profiles(c.Arg("Profile"))
		if err != nil {
			return err
		}
		r.Profiles = p
	}
	return nil
}

// Allows reports whether an enabled rule lets protocol/port in on the
// profile of the machine's network (NetworkCategory).
func (m *Machine) Allows(protocol string, port int) bool {
	for _, r := range m.Firewall {
		if r.Enabled && r.Allow && strings.EqualFold(r.Protocol, protocol) && r.LocalPort == port && slices.Contains(r.Profiles, m.NetworkCategory) {
			return true
		}
	}
	return false
}
