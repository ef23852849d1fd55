package pssim

import (
	"fmt"
	"strings"
)

func (m *Machine) initDotNet() {
	m.methods = map[string]func(*Object, []any) (any, error){
		"serialport.open":  func(*Object, []any) (any, error) { return nil, nil },
		"serialport.close": func(*Object, []any) (any, error) { return nil, nil },
		"serialport.writeline": func(_ *Object, a []any) (any, error) {
			if len(a) == 1 {
				m.Console = append(m.Console, str(a[0]))
				if m.RestartAt != "" && strings.Contains(str(a[0]), m.RestartAt) {
					m.RestartAt = ""
					return nil, m.halt("restart")
				}
			}
			return nil, nil
		},
	}
	m.statics = map[string]func([]any) (any, error){
		"environment::osversion": func([]any) (any, error) {
			return newObject("OperatingSystem", "Version", newObject("Version", "Major", 10, "Build", m.Build)), nil
		},
		"environment::setenvironmentvariable": func(a []any) (any, error) {
			if len(a) != 3 {
				return nil, winErr("SetEnvironmentVariable wants 3 arguments")
			}
			m.Env[strings.ToLower(str(a[0]))] = str(a[1])
			return nil, nil
		},
		"environment::getenvironmentvariable": func(a []any) (any, error) {
			if len(a) < 1 {
				return nil, winErr("GetEnvironmentVariable wants a name")
			}
			return m.Env[strings.ToLower(str(a[0]))], nil
		},
	}
}

func (m *Machine) newObject(c *call) (any, error) {
	typ := str(c.Pos(0))
	if c.Has("TypeName") {
		typ = c.Str("TypeName")
	}
	switch strings.ToLower(typ) {
	case "system.io.ports.serialport":
		return newObject("SerialPort"), nil
	}
	return nil, fmt.Errorf("pssim: the model has no .NET type %s", typ)
}
