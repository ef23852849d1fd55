package pssim

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// icacls is icacls.exe PATH with /inheritance:e|d|r, /grant[:r] and
// /remove[:g] applied in order to the modelled ACL, and icacls's own
// output ("icacls", learn.microsoft.com/windows-server/administration/
// windows-commands/icacls). A name icacls cannot map fails with 1332
// (ERROR_NONE_MAPPED); any other switch fails the run.
func (m *Machine) icacls(args []string) (int, []any, error) {
	if len(args) < 2 {
		return 0, nil, fmt.Errorf("pssim: the model cannot run icacls.exe %s", strings.Join(args, " "))
	}
	p := cleanPath(args[0])
	if !m.fs.exists(p) {
		return 2, []any{p + ": The system cannot find the file specified.", "Successfully processed 0 files; Failed processing 1 files"}, nil
	}
	a := m.fs.acl(p).clone()
	for i := 1; i < len(args); i++ {
		sw := strings.ToLower(args[i])
		var err error
		switch {
		case strings.HasPrefix(sw, "/inheritance:"):
			err = m.inheritance(p, a, strings.TrimPrefix(sw, "/inheritance:"))
		case sw == "/grant" || sw == "/grant:r" || sw == "/remove" || sw == "/remove:g":
			if i+1 >= len(args) {
				return 87, []any{"Invalid parameter \"" + args[i] + "\""}, nil
			}
			i++
			var code int
			if code, err = changeEntries(a, sw, args[i]); code != 0 {
				return code, []any{err.Error(), "Successfully processed 0 files; Failed processing 1 files"}, nil
			}
		default:
			err = fmt.Errorf("pssim: the model cannot run icacls.exe with %s", args[i])
		}
		if err != nil {
			return 0, nil, err
		}
	}
	m.fs.setACL(p, a)
	return 0, []any{"processed file: " + p, "Successfully processed 1 files; Failed processing 0 files"}, nil
}

// inheritance is /inheritance:e (inherit again), :d (keep the inherited
// entries as explicit ones) or :r (drop them); d and r protect the DACL.
func (m *Machine) inheritance(p string, a *ACL, how string) error {
	switch how {
	case "e":
		a.Protected = false
		if par := parent(p); par != "" {
			a.ACEs = slices.DeleteFunc(a.ACEs, func(e ACE) bool { return e.Inherited })
			a.ACEs = append(a.ACEs, inherit(m.fs.acl(par), m.fs.isDir(p), a.Owner).ACEs...)
		}
	case "d":
		a.Protected = true
		for i := range a.ACEs {
			a.ACEs[i].Inherited = false
		}
	case "r":
		a.Protected = true
		a.ACEs = slices.DeleteFunc(a.ACEs, func(e ACE) bool { return e.Inherited })
	default:
		return fmt.Errorf("pssim: the model cannot run icacls.exe /inheritance:%s", how)
	}
	return nil
}

var grantRE = regexp.MustCompile(`^(.+?):((?:\((?:OI|CI|IO|NP|I)\))*)\(?(F|M|RX|R|W|D)\)?$`)

// changeEntries is one /grant, /grant:r or /remove operand: SID or name,
// and for a grant ":(OI)(CI)PERM". A grant adds to the explicit rights
// the SID has; /grant:r replaces them. It returns icacls's exit status
// and message when the name maps to no SID.
func changeEntries(a *ACL, sw, operand string) (int, error) {
	name, grant := operand, ""
	if strings.HasPrefix(sw, "/grant") {
		g := grantRE.FindStringSubmatch(operand)
		if g == nil {
			return 0, fmt.Errorf("pssim: the model cannot read the icacls grant %q", operand)
		}
		name, grant = g[1], g[2]+g[3]
	}
	sid, ok := lookupSID(name)
	if !ok {
		return 1332, winErr("%s: No mapping between account names and security IDs was done.", name)
	}
	if sw != "/grant" {
		a.ACEs = slices.DeleteFunc(a.ACEs, func(e ACE) bool { return e.SID == sid && !e.Inherited })
	}
	if grant == "" {
		return 0, nil
	}
	masks := map[string]uint32{"F": maskF, "M": maskM, "RX": maskRX, "R": maskR, "W": maskW, "D": 0x10000}
	perm := grant[strings.LastIndex(grant, ")")+1:]
	e := ACE{SID: sid, Mask: masks[perm], OI: strings.Contains(grant, "(OI)"), CI: strings.Contains(grant, "(CI)"), IO: strings.Contains(grant, "(IO)")}
	for i, old := range a.ACEs {
		if old.SID == sid && !old.Inherited && old.OI == e.OI && old.CI == e.CI && old.IO == e.IO {
			a.ACEs[i].Mask |= e.Mask
			return 0, nil
		}
	}
	a.ACEs = append([]ACE{e}, a.ACEs...)
	return 0, nil
}

// lookupSID maps "*S-1-..." or an English account name to a SID.
func lookupSID(name string) (string, bool) {
	if strings.HasPrefix(name, "*S-") {
		return name[1:], true
	}
	sid, ok := accounts[strings.ToLower(name)]
	return sid, ok
}
