package pssim

import (
	"fmt"
	"strings"
)

// setupComplete is where Windows Setup looks for a script to run once it
// has finished, as SYSTEM, before the logon screen: on every Setup,
// including a clone's first boot after sysprep ("Add a Custom Script to
// Windows Setup", learn.microsoft.com/windows-hardware/manufacture/desktop/add-a-custom-script-to-windows-setup).
const setupComplete = `C:\Windows\Setup\Scripts\SetupComplete.cmd`

// FirstBoot is the first boot of a clone of this generalized machine:
// Setup's specialize and OOBE passes, then SetupComplete.cmd if the image
// has one, then, when startupTasks, the tasks triggered at startup. It
// returns the tasks Task Scheduler started, each once: a start of a task
// already running is ignored (the MultipleInstances default, IgnoreNew:
// learn.microsoft.com/windows/win32/taskschd/tasksettings-multipleinstances).
// Whether the AtStartup trigger fires at this boot is the assumption hwk's
// image leans on and nobody has seen (review 4, D8), hence the switch.
func (m *Machine) FirstBoot(startupTasks bool) ([]string, error) {
	if !m.Generalized {
		return nil, fmt.Errorf("the machine was not generalized: a clone of it does not run Setup")
	}
	m.Generalized, m.Halted, m.running, m.started = false, "", map[string]bool{}, nil
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
