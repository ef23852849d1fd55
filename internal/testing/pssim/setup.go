package pssim

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// maskedRE finds the secrets Windows Setup masks in the answer file it
// caches in %WINDIR%\Panther once a pass has used them ("Hide Sensitive
// Data in an Answer File": they become *SENSITIVE*DATA*DELETED*).
var maskedRE = regexp.MustCompile(`(?s)(<(?:AdministratorPassword|Password)>(?:\s|<!--.*?-->)*<Value>)[^<]*(</Value>)`)

const masked = "*SENSITIVE*DATA*DELETED*"

var autoLogonRE = regexp.MustCompile(`(?s)<AutoLogon>.*?<Password>\s*<Value>([^<]*)</Value>`)

const winlogon = `HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion\Winlogon`

// Setup stands in for Windows Setup installing the machine from media,
// with disk (the build disk's files by slash path) in a CD drive labelled
// label: it caches the disk's Autounattend.xml in Panther with its
// passwords masked, runs firstLogon (the FirstLogonCommands' PowerShell)
// at the first logon, and then starts the machine again after each
// restart, running the tasks Task Scheduler starts at startup, until the
// machine powers off. A boot after which the machine neither restarts nor
// powers off is an error: the real VM would sit there running.
func (m *Machine) Setup(label string, disk map[string][]byte, firstLogon string) error {
	m.InsertCD("E", label, disk)
	if a, ok := disk["Autounattend.xml"]; ok {
		m.WriteFile(`C:\Windows\Panther\unattend.xml`, maskedRE.ReplaceAll(a, []byte("${1}"+masked+"${2}")))
		// AutoLogon is Winlogon's: its password goes to the registry
		// (DefaultPassword), where Windows keeps it in plain text.
		if p := autoLogonRE.FindSubmatch(a); p != nil {
			w := m.Registry[key(winlogon)]
			w["AutoAdminLogon"], w["DefaultUserName"], w["DefaultPassword"], w["AutoLogonCount"] = "1", "Administrator", string(p[1]), 1
		}
	}
	r := m.Run(firstLogon, "the first logon command")
	for boot := 1; ; boot++ {
		if r.Err != nil && m.Halted == "" {
			return fmt.Errorf("boot %d: %w", boot, r.Err)
		}
		switch m.Halted {
		case "poweroff":
			return nil
		case "":
			return fmt.Errorf("boot %d: the scripts ended and the machine stays on: an install would wait for it forever", boot)
		}
		if boot > 8 {
			return fmt.Errorf("the machine restarted %d times", boot)
		}
		tasks := m.Boot()
		if len(tasks) == 0 {
			return fmt.Errorf("boot %d: no task runs at startup, and the machine stays on", boot+1)
		}
		for _, t := range tasks {
			if r = m.RunTask(t); m.Halted != "" {
				break
			}
		}
	}
}

// Secrets are the places on the machine's disk that hold any of secrets
// in plain text: file paths and registry values.
func (m *Machine) Secrets(secrets ...string) []string {
	var out []string
	for _, f := range m.Files() {
		for _, s := range secrets {
			if s != "" && strings.Contains(string(f.Data), s) {
				out = append(out, f.Path)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.Registry)) {
		for name, v := range m.Registry[k] {
			for _, s := range secrets {
				if s != "" && strings.Contains(str(v), s) {
					out = append(out, k+`\`+name)
				}
			}
		}
	}
	return out
}
