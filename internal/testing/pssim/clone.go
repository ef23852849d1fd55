package pssim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/xml"
	"fmt"
	"strings"
	"unicode/utf16"
)

// setupComplete is where Windows Setup looks for a script to run once it
// has finished, as SYSTEM, before the logon screen: on every Setup,
// including a clone's first boot after sysprep ("Add a Custom Script to
// Windows Setup", learn.microsoft.com/windows-hardware/manufacture/desktop/add-a-custom-script-to-windows-setup).
const setupComplete = `C:\Windows\Setup\Scripts\SetupComplete.cmd`

// FirstBoot is the first boot of a clone of this generalized machine,
// with seed (its files by slash path) in its CD drive, labelled cidata,
// and no other disc: Setup's specialize and OOBE passes with the answer
// file its implicit search finds (see answerFile), then SetupComplete.cmd
// if the image has one, then, when startupTasks, the tasks triggered at
// startup. It returns the tasks Task Scheduler started, each once: a
// start of a task already running is ignored (the MultipleInstances
// default, IgnoreNew:
// learn.microsoft.com/windows/win32/taskschd/tasksettings-multipleinstances).
// Whether the AtStartup trigger fires at this boot is the assumption hwk's
// image leans on and nobody has seen (review 4, D8), hence the switch.
func (m *Machine) FirstBoot(seed map[string][]byte, startupTasks bool) ([]string, error) {
	if !m.Generalized {
		return nil, fmt.Errorf("the machine was not generalized: a clone of it does not run Setup")
	}
	m.Generalized, m.Halted, m.running, m.started = false, "", map[string]bool{}, nil
	for _, letter := range m.discs() {
		m.EjectCD(letter)
	}
	m.InsertCD("D", "cidata", seed)
	if err := m.oobe(); err != nil {
		return nil, err
	}
	m.Registry[key(setupState)]["ImageState"] = "IMAGE_STATE_COMPLETE"
	if f := m.fs.file(setupComplete); f != nil {
		if err := m.runCmd(string(f.Data)); err != nil {
			return nil, fmt.Errorf("SetupComplete.cmd: %w", err)
		}
		if m.Halted != "" {
			return nil, fmt.Errorf("SetupComplete.cmd: the machine went down (%s) inside Setup", m.Halted)
		}
	}
	if startupTasks {
		for _, t := range m.Boot() {
			m.startTask(t.Name)
		}
	}
	return m.started, nil
}

// answerFiles are where Setup's implicit search looks in the passes after
// windowsPE, by precedence ("Windows Setup Automation Overview", the
// implicit answer file search order: the registry's
// HKLM\System\Setup!UnattendFile, %WINDIR%\Panther\Unattend,
// %WINDIR%\Panther, removable media at their root, then
// %WINDIR%\System32\Sysprep and %SYSTEMDRIVE%). The highest one found is
// the one used, whatever the others hold.
func (m *Machine) answerFile() (string, []byte) {
	var paths []string
	if p, ok := m.Registry[key(`HKLM:\SYSTEM\Setup`)]["UnattendFile"].(string); ok {
		paths = append(paths, p)
	}
	for _, dir := range []string{`C:\Windows\Panther\Unattend`, `C:\Windows\Panther`} {
		paths = append(paths, join(dir, "unattend.xml"), join(dir, "autounattend.xml"))
	}
	for _, letter := range m.discs() {
		paths = append(paths, letter+`:\unattend.xml`, letter+`:\autounattend.xml`)
	}
	paths = append(paths, `C:\Windows\System32\Sysprep\unattend.xml`, `C:\unattend.xml`)
	for _, p := range paths {
		if f := m.fs.file(p); f != nil {
			return p, f.Data
		}
	}
	return "", nil
}

// oobe is Setup's specialize and oobeSystem passes on a clone: the
// Administrator's password comes from the answer file, or OOBE stops at
// the page that asks for it, as Windows Server's does after sysprep
// (its "Customize settings" page). A password Setup masked in an earlier
// Setup's cached copy is no password. Setup caches the file it used in
// Panther, with its secrets masked ("Hide Sensitive Data in an Answer
// File").
func (m *Machine) oobe() error {
	path, data := m.answerFile()
	if data == nil {
		return fmt.Errorf("OOBE waits at its first page: no answer file in Panther or at the root of a removable disk")
	}
	var doc struct {
		Settings []struct {
			Pass       string `xml:"pass,attr"`
			Components []struct {
				Password *struct {
					Value     string
					PlainText string
				} `xml:"UserAccounts>AdministratorPassword"`
			} `xml:"component"`
		} `xml:"settings"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("Setup cannot read %s: %w", path, err)
	}
	var pw []string
	for _, st := range doc.Settings {
		for _, c := range st.Components {
			if st.Pass == "oobeSystem" && c.Password != nil {
				pw = []string{"", strings.TrimSpace(c.Password.Value), strings.TrimSpace(c.Password.PlainText)}
			}
		}
	}
	if pw == nil {
		return fmt.Errorf("OOBE waits for an Administrator password: %s sets none", path)
	}
	password := pw[1]
	if strings.EqualFold(pw[2], "false") {
		var err error
		if password, err = unhide(password, "AdministratorPassword"); err != nil {
			return fmt.Errorf("OOBE: %s: %w", path, err)
		}
	}
	if password == masked {
		return fmt.Errorf("OOBE: %s holds the password an earlier Setup masked, not one for this clone", path)
	}
	m.AdminPassword = password
	m.Log = append(m.Log, "Setup: the answer file is "+path)
	m.WriteFile(`C:\Windows\Panther\unattend.xml`, maskedRE.ReplaceAll(data, []byte("${1}"+masked+"${2}")))
	return nil
}

// unhide decodes a password Windows SIM hid: Base64 of the UTF-16LE of
// the password followed by the element's name.
func unhide(hidden, element string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(hidden)
	if err != nil || len(b)%2 != 0 {
		if hidden == masked {
			return masked, nil
		}
		return "", fmt.Errorf("a hidden password that is not Base64 of UTF-16: %q", hidden)
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	s, ok := strings.CutSuffix(string(utf16.Decode(u)), element)
	if !ok {
		return "", fmt.Errorf("a hidden password without its element's name")
	}
	return s, nil
}

// startTask is Task Scheduler starting a task at this boot.
func (m *Machine) startTask(name string) {
	if m.running == nil {
		m.running = map[string]bool{}
	}
	if m.running[strings.ToLower(name)] {
		m.Log = append(m.Log, "Task Scheduler: "+name+" is running; the new instance is ignored")
		return
	}
	m.running[strings.ToLower(name)] = true
	m.started = append(m.started, name)
	m.Log = append(m.Log, "Task Scheduler: started "+name)
}

// runCmd runs a batch file of the lines SetupComplete.cmd needs: @echo
// off, rem, exit /b N, and programs with plain arguments.
func (m *Machine) runCmd(text string) error {
	for line := range strings.SplitSeq(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0, strings.EqualFold(f[0], "@echo"), strings.EqualFold(f[0], "rem"):
			continue
		case strings.EqualFold(f[0], "exit"):
			return nil
		}
		code, out, err := m.program(strings.ToLower(base(f[0])), f[0], f[1:], nil)
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("%s exited with %d: %v", line, code, out)
		}
	}
	return nil
}

// schtasks is schtasks.exe /run /tn NAME, with its messages.
func (m *Machine) schtasks(args []string) (int, []any) {
	var run bool
	var name string
	for i, a := range args {
		switch strings.ToLower(a) {
		case "/run":
			run = true
		case "/tn":
			if i+1 < len(args) {
				name = strings.Trim(args[i+1], `"`)
			}
		}
	}
	if !run || name == "" {
		return 1, []any{"ERROR: Invalid syntax."}
	}
	if _, ok := m.Tasks[strings.ToLower(name)]; !ok {
		return 1, []any{"ERROR: The system cannot find the file specified."}
	}
	m.startTask(name)
	return 0, []any{fmt.Sprintf("SUCCESS: Attempted to run the scheduled task %q.", name)}
}
