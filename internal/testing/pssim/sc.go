package pssim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// startTypes are sc.exe's start= values the model knows ("sc.exe create",
// learn.microsoft.com/windows-server/administration/windows-commands/sc-create).
var startTypes = map[string]string{"auto": "Automatic", "delayed-auto": "Automatic", "demand": "Manual", "disabled": "Disabled"}

// scOptions are the "name= value" pairs each sc.exe command takes, as
// the model knows them (sc-create, sc-config, sc-failure on
// learn.microsoft.com/windows-server/administration/windows-commands).
var scOptions = map[string][]string{
	"create":  {"binpath", "start", "depend", "displayname", "obj", "type"},
	"config":  {"binpath", "start", "depend", "displayname"},
	"failure": {"reset", "actions"},
}

// sc is sc.exe create, config, failure, failureflag and description with
// sc.exe's messages and exit statuses (the Win32 error: 1060
// ERROR_SERVICE_DOES_NOT_EXIST, 1073 ERROR_SERVICE_EXISTS). An option
// sc.exe would not take, or one written "name=value" (sc.exe wants the
// space after "="), fails the run.
func (m *Machine) sc(args []string) (int, []any, error) {
	if len(args) < 2 {
		return 0, nil, fmt.Errorf("pssim: the model cannot run sc.exe %s", strings.Join(args, " "))
	}
	cmd, name := strings.ToLower(args[0]), args[1]
	switch cmd {
	case "failureflag", "description":
		if len(args) != 3 {
			return 0, nil, fmt.Errorf("pssim: the model cannot run sc.exe %s", strings.Join(args, " "))
		}
		return m.scConfig2(cmd, name, args[2])
	}
	known, ok := scOptions[cmd]
	if !ok {
		return 0, nil, fmt.Errorf("pssim: the model has no sc.exe %s", args[0])
	}
	opts, err := scPairs(args[2:], known)
	if err != nil {
		return 0, nil, err
	}
	switch cmd {
	case "create":
		return m.scCreate(name, opts)
	case "config":
		return m.scChange(name, opts)
	}
	return m.scFailure(name, opts)
}

// scPairs reads "name= value" pairs.
func scPairs(args, known []string) (map[string]string, error) {
	opts := map[string]string{}
	for i := 0; i < len(args); i += 2 {
		o := strings.ToLower(args[i])
		if !strings.HasSuffix(o, "=") || i+1 >= len(args) {
			return nil, fmt.Errorf("pssim: sc.exe reads %q as no option: it wants \"name= value\", a space after the =", args[i])
		}
		o = strings.TrimSuffix(o, "=")
		if !slices.Contains(known, o) {
			return nil, fmt.Errorf("pssim: the model has no sc.exe option %s=", o)
		}
		opts[o] = args[i+1]
	}
	return opts, nil
}

func scFailed(api string, code int) (int, []any, error) {
	msg := map[int]string{1060: "The specified service does not exist as an installed service.", 1073: "The specified service already exists.",
		87: "The parameter is incorrect."}[code]
	return code, []any{fmt.Sprintf("[SC] %s FAILED %d:", api, code), "", msg, ""}, nil
}

func (m *Machine) scCreate(name string, opts map[string]string) (int, []any, error) {
	if m.service(name) != nil {
		return scFailed("CreateService", 1073)
	}
	if opts["binpath"] == "" {
		return scFailed("CreateService", 87)
	}
	s := &Service{Name: name, Status: "Stopped", StartType: "Manual", BinPath: opts["binpath"], DisplayName: opts["displayname"]}
	if _, ok := opts["start"]; ok {
		if err := s.setStart(opts["start"]); err != nil {
			return 0, nil, err
		}
	}
	s.setDepend(opts["depend"])
	m.Services[strings.ToLower(name)] = s
	return 0, []any{"[SC] CreateService SUCCESS"}, nil
}

func (m *Machine) scChange(name string, opts map[string]string) (int, []any, error) {
	s := m.service(name)
	if s == nil {
		return scFailed("OpenService", 1060)
	}
	for o, v := range opts {
		switch o {
		case "start":
			if err := s.setStart(v); err != nil {
				return 0, nil, err
			}
		case "binpath":
			s.BinPath = v
		case "displayname":
			s.DisplayName = v
		case "depend":
			s.setDepend(v)
		}
	}
	return 0, []any{"[SC] ChangeServiceConfig SUCCESS"}, nil
}

func (s *Service) setStart(v string) error {
	st, ok := startTypes[strings.ToLower(v)]
	if !ok {
		return fmt.Errorf("pssim: the model has no sc.exe start= %s", v)
	}
	s.StartType, s.Delayed = st, strings.EqualFold(v, "delayed-auto")
	return nil
}

// setDepend is depend=: names separated by forward slashes.
func (s *Service) setDepend(v string) {
	s.DependsOn = nil
	for d := range strings.SplitSeq(v, "/") {
		if d != "" {
			s.DependsOn = append(s.DependsOn, d)
		}
	}
}

// scFailure is sc.exe failure NAME reset= SECONDS actions= A/MS/...:
// reset= and actions= go together, each action restart, run, reboot or
// "" (none) with its delay in milliseconds (sc-failure).
func (m *Machine) scFailure(name string, opts map[string]string) (int, []any, error) {
	s := m.service(name)
	if s == nil {
		return scFailed("OpenService", 1060)
	}
	reset, hasReset := opts["reset"]
	actions, hasActions := opts["actions"]
	if hasReset != hasActions {
		return 0, nil, fmt.Errorf("pssim: sc.exe failure wants reset= and actions= together")
	}
	secs, err := strconv.Atoi(reset)
	if err != nil {
		return 0, nil, fmt.Errorf("pssim: sc.exe failure reset= %q is no number of seconds", reset)
	}
	f := strings.Split(actions, "/")
	if len(f)%2 != 0 {
		return 0, nil, fmt.Errorf("pssim: sc.exe failure actions= %q is not action/delay pairs", actions)
	}
	var list []string
	for i := 0; i < len(f); i += 2 {
		if _, err := strconv.Atoi(f[i+1]); err != nil || !slices.Contains([]string{"restart", "run", "reboot", ""}, strings.ToLower(f[i])) {
			return 0, nil, fmt.Errorf("pssim: sc.exe failure actions= %q: %q/%q is no action and delay", actions, f[i], f[i+1])
		}
		list = append(list, strings.ToLower(f[i])+"/"+f[i+1])
	}
	s.Recovery, s.ResetSeconds = list, secs
	return 0, []any{"[SC] ChangeServiceConfig2 SUCCESS"}, nil
}

// scConfig2 is sc.exe failureflag NAME 0|1 (SERVICE_FAILURE_ACTIONS_FLAG:
// the actions also run when the service stops with an error,
// learn.microsoft.com/windows/win32/api/winsvc/ns-winsvc-service_failure_actions_flag)
// and sc.exe description NAME TEXT.
func (m *Machine) scConfig2(cmd, name, v string) (int, []any, error) {
	s := m.service(name)
	if s == nil {
		return scFailed("OpenService", 1060)
	}
	if cmd == "description" {
		s.Description = v
	} else if v == "0" || v == "1" {
		s.FailureActionsOnNonCrash = v == "1"
	} else {
		return 0, nil, fmt.Errorf("pssim: sc.exe failureflag %s %s: the flag is 0 or 1", name, v)
	}
	return 0, []any{"[SC] ChangeServiceConfig2 SUCCESS"}, nil
}

// registerContainerd is containerd.exe --register-service: a service
// "containerd", Automatic, restarted 15 s after its first two failures
// in a day (containerd cmd/containerd/command/service_windows.go,
// registerService). It fails when the service exists (CreateService:
// ERROR_SERVICE_EXISTS).
func (m *Machine) registerContainerd(prog string) (int, []any, error) {
	if m.service("containerd") != nil {
		return 1, []any{"containerd: The specified service already exists."}, nil
	}
	m.Services["containerd"] = &Service{Name: "containerd", DisplayName: "Containerd", Description: "Container runtime",
		Status: "Stopped", StartType: "Automatic", BinPath: prog,
		Recovery: []string{"restart/15000", "restart/15000", "/0"}, ResetSeconds: 86400}
	return 0, nil, nil
}
