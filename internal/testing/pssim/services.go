package pssim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Service is a Windows service as the Service Control Manager keeps it.
// Status is Running, Stopped, StartPending or StopPending; StartType is
// what PowerShell 5.1's ServiceController shows: Automatic (Delayed or
// not), Manual or Disabled.
type Service struct {
	Name, Status, StartType, BinPath string
	DisplayName, Description         string
	// Delayed: Automatic (Delayed Start), which 5.1's StartType shows
	// as Automatic (sc.exe start= delayed-auto).
	Delayed bool
	// DependsOn are the services the SCM starts before this one.
	DependsOn []string
	// StartSeconds and StopSeconds are how long the service stays
	// StartPending and StopPending; Start-Service and Stop-Service wait.
	StartSeconds, StopSeconds int
	// FailStart, when set, is why the service's process ends as it
	// starts (it never reports Running).
	FailStart string
	// Recovery: the failure actions (sc.exe failure, SetRecoveryActions),
	// each "restart/5000"-like, the reset period in seconds, and
	// FailureActionsOnNonCrash (sc.exe failureflag).
	Recovery                 []string
	ResetSeconds             int
	FailureActionsOnNonCrash bool
}

func (s *Service) display() string {
	if s.DisplayName == "" {
		return s.Name
	}
	return s.DisplayName
}

// label is how PowerShell's service cmdlets name a service in their
// messages: "DisplayName (Name)" (ServiceResources.resx, "{1} ({0})").
func (s *Service) label() string { return s.display() + " (" + s.Name + ")" }

func (m *Machine) service(name string) *Service { return m.Services[strings.ToLower(name)] }

// dependents are the services that depend on s, sorted by name.
func (m *Machine) dependents(s *Service) []*Service {
	var out []*Service
	for _, k := range slices.Sorted(maps.Keys(m.Services)) {
		if slices.ContainsFunc(m.Services[k].DependsOn, func(d string) bool { return strings.EqualFold(d, s.Name) }) {
			out = append(out, m.Services[k])
		}
	}
	return out
}

func (m *Machine) getService(c *call) (any, error) {
	var out []any
	for _, n := range asList(c.Arg("Name")) {
		s := m.service(str(n))
		if s == nil {
			return nil, nonTerminating{fmt.Sprintf("Cannot find any service with service name '%s'.", str(n))}
		}
		deps := make([]any, len(s.DependsOn))
		for i, d := range s.DependsOn {
			deps[i] = d
		}
		out = append(out, newObject("ServiceController", "Name", s.Name, "DisplayName", s.display(), "Status", s.Status,
			"StartType", s.StartType, "ServicesDependedOn", deps))
	}
	return unwrap(out), nil
}

// setService is Set-Service -StartupType: 5.1's parameter is a .NET
// Framework ServiceStartMode, which has no AutomaticDelayedStart (it
// came with PowerShell 6: PowerShell/PowerShell #7486), and only
// changes the start type (ChangeServiceConfigW), not the delayed flag.
func (m *Machine) setService(c *call) (any, error) {
	for k := range c.named {
		if !slices.Contains([]string{"name", "startuptype", "erroraction"}, k) {
			return nil, fmt.Errorf("pssim: the model has no Set-Service -%s", k)
		}
	}
	s := m.service(c.Str("Name"))
	if s == nil {
		return nil, nonTerminating{fmt.Sprintf("Service %s was not found on computer '.'.", c.Str("Name"))}
	}
	if c.Has("StartupType") {
		st := strings.ToLower(c.Str("StartupType"))
		want := map[string]string{"automatic": "Automatic", "manual": "Manual", "disabled": "Disabled"}[st]
		if want == "" {
			return nil, winErr(`Cannot bind parameter 'StartupType'. Cannot convert value "%s" to type "System.ServiceProcess.ServiceStartMode". Error: "Unable to match the identifier name %s to a valid enumerator name. Specify one of the following enumerator names and try again: Boot, System, Automatic, Manual, Disabled"`, c.Str("StartupType"), c.Str("StartupType"))
		}
		s.StartType = want
	}
	return nil, nil
}

// warn writes a warning unless -WarningAction or $WarningPreference
// silences it.
func (m *Machine) warn(c *call, msg string) {
	pref := strings.ToLower(c.Str("WarningAction"))
	if pref == "" && c.sc != nil {
		p, _ := c.sc.get("WarningPreference")
		pref = strings.ToLower(str(p))
	}
	if pref != "silentlycontinue" && pref != "ignore" {
		m.Warnings = append(m.Warnings, msg)
	}
}

// startService is Start-Service (ServiceOperationBaseCommand.DoStartService
// in PowerShell's src/Microsoft.PowerShell.Commands.Management/commands/
// management/Service.cs): the SCM starts the service's dependencies
// first; the cmdlet waits for Running, warning every 2 seconds
// (DoWaitForStatus), and a service that stops instead fails it.
func (m *Machine) startService(c *call) (any, error) {
	s := m.service(c.Str("Name"))
	if s == nil {
		return nil, nonTerminating{fmt.Sprintf("Cannot find any service with service name '%s'.", c.Str("Name"))}
	}
	return nil, m.startWaiting(c, s)
}

func (m *Machine) startWaiting(c *call, s *Service) error {
	if err := m.scmStart(s, map[string]bool{}); err != nil {
		if err == errStartFailed {
			return nonTerminating{fmt.Sprintf("Failed to start service '%s'.", s.label())}
		}
		return nonTerminating{fmt.Sprintf("Service '%s' cannot be started due to the following error: Cannot start service %s on computer '.'.", s.label(), s.Name)}
	}
	for w := 0; w < (s.StartSeconds-1)/2; w++ {
		m.warn(c, fmt.Sprintf("Waiting for service '%s' to start...", s.label()))
	}
	return nil
}

var errStartFailed = winMsg("the service stopped as it started")

// scmStart is StartServiceW: dependencies first (a missing one is 1075,
// ERROR_SERVICE_DEPENDENCY_DELETED; one that fails is 1068,
// ERROR_SERVICE_DEPENDENCY_FAIL), a Disabled service is 1058
// (ERROR_SERVICE_DISABLED); "System Error Codes (1000-1299)",
// learn.microsoft.com/windows/win32/debug/system-error-codes--1000-1299-.
func (m *Machine) scmStart(s *Service, seen map[string]bool) error {
	if s.Status == "Running" || seen[strings.ToLower(s.Name)] {
		return nil
	}
	seen[strings.ToLower(s.Name)] = true
	if s.StartType == "Disabled" {
		return m.scmLog(s, "1058: The service cannot be started, either because it is disabled or because it has no enabled devices associated with it.")
	}
	for _, d := range s.DependsOn {
		dep := m.service(d)
		if dep == nil {
			return m.scmLog(s, "1075: The dependency service does not exist or has been marked for deletion.")
		}
		if err := m.scmStart(dep, seen); err != nil {
			return m.scmLog(s, "1068: The dependency service or group failed to start.")
		}
	}
	why := s.FailStart
	if why == "" && strings.EqualFold(s.Name, "sshd") {
		why = m.sshdStart(s)
	}
	if why != "" {
		s.Status = "Stopped"
		m.Log = append(m.Log, "Service Control Manager: "+s.label()+" terminated: "+why)
		return errStartFailed
	}
	s.Status = "Running"
	return nil
}

func (m *Machine) scmLog(s *Service, why string) error {
	m.Log = append(m.Log, "Service Control Manager: "+s.label()+" not started: "+why)
	return winMsg(why)
}

// stopService is Stop-Service (DoStopService): a service others depend
// on and that run stops only with -Force, which stops them first.
func (m *Machine) stopService(c *call) (any, error) {
	s := m.service(c.Str("Name"))
	if s == nil {
		return nil, nonTerminating{fmt.Sprintf("Cannot find any service with service name '%s'.", c.Str("Name"))}
	}
	_, err := m.stopWaiting(c, s)
	return nil, err
}

// stopWaiting stops s and returns the services it stopped, dependents
// first.
func (m *Machine) stopWaiting(c *call, s *Service) ([]*Service, error) {
	var running []*Service
	for _, d := range m.dependents(s) {
		if d.Status != "Stopped" {
			running = append(running, d)
		}
	}
	if len(running) > 0 && !c.Switch("Force") {
		return nil, nonTerminating{fmt.Sprintf("Cannot stop service '%s' because it has dependent services. It can only be stopped if the Force flag is set.", s.label())}
	}
	var stopped []*Service
	for _, d := range running {
		more, err := m.stopWaiting(c, d)
		if err != nil {
			return nil, err
		}
		stopped = append(stopped, more...)
	}
	if s.Status != "Stopped" {
		for w := 0; w < (s.StopSeconds-1)/2; w++ {
			m.warn(c, fmt.Sprintf("Waiting for service '%s' to stop...", s.label()))
		}
	}
	s.Status = "Stopped"
	return append(stopped, s), nil
}

// restartService is Restart-Service (RestartServiceCommand in
// Service.cs): Stop-Service's rules, then a start of every service it
// stopped.
func (m *Machine) restartService(c *call) (any, error) {
	s := m.service(c.Str("Name"))
	if s == nil {
		return nil, nonTerminating{fmt.Sprintf("Cannot find any service with service name '%s'.", c.Str("Name"))}
	}
	stopped, err := m.stopWaiting(c, s)
	if err != nil {
		return nil, err
	}
	for i := len(stopped) - 1; i >= 0; i-- {
		if err := m.startWaiting(c, stopped[i]); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// bootServices is the SCM at startup: it starts the Automatic services
// (delayed ones too, later), each after its dependencies; the others
// stay Stopped.
func (m *Machine) bootServices() {
	for _, svc := range m.Services {
		svc.Status = "Stopped"
	}
	for _, k := range slices.Sorted(maps.Keys(m.Services)) {
		if svc := m.Services[k]; svc.StartType == "Automatic" {
			_ = m.scmStart(svc, map[string]bool{})
		}
	}
}
