// Package pssim runs the PowerShell hwk sends to Windows against a model
// of a Windows Server machine, for tests on hosts with no Windows and no
// PowerShell. It is not PowerShell: it reads the subset of the language
// hwk's scripts are written in (they name every cmdlet by module, see
// internal/testing/pscatalog), runs each statement in order, and applies what
// each command does to the model under Windows' own rules where they have
// stopped hwk before:
//
//   - a CD's files are read-only (CDFS sets FILE_ATTRIBUTE_READONLY on
//     every file: Windows-driver-samples filesys/cdfs/strucsup.c,
//     CdInitializeFcbFromFileContext), and copies keep the attribute
//     (CopyFile, Remarks; Copy-Item copies with FileInfo.CopyTo);
//   - writing a read-only file fails with "Access to the path ... is
//     denied." unless the cmdlet has -Force; OpenSSH's install-sshd.ps1
//     rewrites openssh-events.man with a StreamWriter under its own
//     $ErrorActionPreference = 'Stop', and sshd makes sshd_config with
//     CopyFileW from sshd_config_default (PowerShell/openssh-portable
//     contrib/win32/openssh/install-sshd.ps1, win32compat/wmain_sshd.c);
//   - New-Item -Force on an existing registry key deletes the key first
//     (PowerShell's RegistryProvider.NewItem);
//   - a GUI program (sysprep.exe) run with & is not waited for and sets
//     no $LASTEXITCODE (NativeCommandProcessor: a Windows program last
//     in a pipeline runs in the background); Start-Process -Wait does;
//   - a scheduled task registered without settings keeps Task
//     Scheduler's defaults, under which it does not start on battery
//     (DisallowStartIfOnBatteries, StopIfGoingOnBatteries: TRUE), and
//     RestartCount re-runs a task only when it could not be started, not
//     when its program exits non-zero (MS-TSCH 2.5.4.2).
//
// A command, program, .NET member or method the model does not know
// fails the run, so a script that grows a new command fails its test
// until the model learns it.
package pssim

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Service is a Windows service.
type Service struct {
	Name, Status, StartType, BinPath string
}

// Task is a registered scheduled task.
type Task struct {
	Name     string
	Execute  string
	Argument string
	// AtStartup: the task's trigger is the machine's start.
	AtStartup bool
	// Settings, with Task Scheduler's defaults where the script gave none.
	DisallowStartIfOnBatteries, StopIfGoingOnBatteries bool
	RunOnlyIfIdle, RunOnlyIfNetworkAvailable           bool
	RestartCount                                       int
}

// Machine is the model of one Windows machine.
type Machine struct {
	fs *fsys
	// Env are the machine's environment variables by lower-case name.
	Env map[string]string
	// Registry keys by lower-case path (HKLM:\...), each a map of values.
	Registry map[string]map[string]any
	Services map[string]*Service
	Tasks    map[string]*Task
	// Console is what was written to COM1.
	Console []string
	// Errors are the non-terminating errors the scripts wrote and went on.
	Errors []string
	// Log is every command run, in order.
	Log []string
	// Build is Windows' build number (20348: Server 2022).
	Build        int
	ComputerName string
	// Defender: the machine has Microsoft Defender (ConfigDefender).
	Defender bool
	// OnBattery: the host runs on battery, which Hyper-V passes to its
	// guests as a battery (Msvm_Battery).
	OnBattery bool
	// SysprepFails makes sysprep fail (it writes setuperr.log and leaves
	// the image state); SysprepExit is its exit status, whichever way it
	// went (Microsoft documents none).
	SysprepFails bool
	SysprepExit  int
	// WevtutilWarns: install-sshd.ps1 fails after it made the services.
	WevtutilWarns bool
	// DefenderStarting is how many more calls Defender's cmdlets fail,
	// as they do before its service has started.
	DefenderStarting int
	// RestartAt makes the machine restart (once) when a console line
	// holds it: a restart in the middle of a phase.
	RestartAt string
	// Generalized is true once sysprep has generalized the machine.
	Generalized bool
	// Halted is "restart" or "poweroff" once the machine went down.
	Halted string
	// Features are the optional features enabled.
	Features []string
	// DiskBytes and PartitionBytes: C:'s disk and partition sizes.
	DiskBytes, PartitionBytes int64
	// Adapters are the physical network adapters' states.
	Adapters []string

	volumes  map[string]string // drive letter -> label
	methods  map[string]func(*Object, []any) (any, error)
	statics  map[string]func([]any) (any, error)
	sysprepQ []string // a sysprep started in the background
}

// NewServer2022 is a Windows Server 2022 Datacenter (Server Core) just
// installed: Defender on, no sshd, one adapter up, a 40 GiB disk.
func NewServer2022() *Machine {
	m := &Machine{
		fs: newFS(),
		Env: map[string]string{
			"programfiles": `C:\Program Files`, "programdata": `C:\ProgramData`, "systemroot": `C:\Windows`,
			"windir": `C:\Windows`, "systemdrive": "C:", "computername": "WIN-HWKBUILD", "path": `C:\Windows\system32;C:\Windows`,
		},
		Registry: map[string]map[string]any{
			// Microsoft's Known Issue Rollback overrides live here too.
			key(`HKLM:\SYSTEM\CurrentControlSet\Policies\Microsoft\FeatureManagement\Overrides`): {"4103588492": 1},
			key(`HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion\Winlogon`):                   {"Shell": "explorer.exe"},
			key(`HKLM:\SOFTWARE\Microsoft\Windows\CurrentVersion\Setup\State`):                   {"ImageState": "IMAGE_STATE_COMPLETE"},
		},
		Services: map[string]*Service{
			"wuauserv": {Name: "wuauserv", Status: "Running", StartType: "Manual"},
			"winrm":    {Name: "WinRM", Status: "Running", StartType: "Automatic"},
		},
		Tasks:        map[string]*Task{},
		Build:        20348,
		ComputerName: "WIN-HWKBUILD",
		Defender:     true,
		DiskBytes:    40 << 30,
		Adapters:     []string{"Up"},
		volumes:      map[string]string{"C": ""},
	}
	m.PartitionBytes = m.DiskBytes - 600<<20
	for _, d := range []string{`C:\Windows\System32\Sysprep`, `C:\Windows\Panther`, `C:\ProgramData`, `C:\Program Files`, `C:\Users\Administrator`} {
		m.fs.mkdirAll(d)
	}
	m.fs.files[key(`C:\Windows\System32\Sysprep\sysprep.exe`)] = &File{Path: `C:\Windows\System32\Sysprep\sysprep.exe`, Data: []byte("MZ")}
	m.initDotNet()
	return m
}

// Files are every file on the machine's C: drive.
func (m *Machine) Files() []*File { return m.fs.walk(`C:\`) }

// File is the file at p, or nil.
func (m *Machine) File(p string) *File { return m.fs.file(p) }

// WriteFile puts a file on the machine.
func (m *Machine) WriteFile(p string, data []byte) {
	m.fs.mkdirAll(parent(p))
	m.fs.files[key(p)] = &File{Path: cleanPath(p), Data: data}
}

// InsertCD attaches a CD or DVD at drive (a letter) labelled label, with
// files by slash path: CDFS makes every one read-only.
func (m *Machine) InsertCD(drive, label string, files map[string][]byte) {
	root := drive + `:\`
	m.fs.mkdirAll(root)
	m.volumes[strings.ToUpper(drive)] = label
	for name, data := range files {
		p := join(root, strings.ReplaceAll(name, "/", `\`))
		m.fs.mkdirAll(parent(p))
		m.fs.files[key(p)] = &File{Path: p, Data: data, ReadOnly: true}
	}
}

// Result is how a script run ended.
type Result struct {
	// Exit is the status powershell.exe would end with.
	Exit int
	// Err is the error that ended the script, if one did.
	Err error
	// Output is what the script wrote to its output.
	Output []string
}

// Run runs script (named name, for messages) as powershell.exe -File
// does.
func (m *Machine) Run(script, name string) Result {
	in := &interp{m: m, funcs: map[string]*function{}, script: name}
	sc := newScope(nil)
	sc.script = name
	sc.set("ErrorActionPreference", "Continue")
	sc.set("LASTEXITCODE", 0)
	body, err := parse(script)
	if err != nil {
		return Result{Exit: 1, Err: fmt.Errorf("%s: pssim cannot read it: %w", name, err)}
	}
	out, err := in.runBlock(body, sc)
	r := Result{}
	for _, o := range out {
		r.Output = append(r.Output, str(o))
	}
	var ex exitSignal
	var halt haltSignal
	var ret returnSignal
	switch {
	case err == nil, errors.As(err, &ret):
	case errors.As(err, &ex):
		r.Exit = ex.code
	case errors.As(err, &halt):
	default:
		r.Exit, r.Err = 1, fmt.Errorf("%s: %w", name, err)
	}
	if m.Halted == "" && len(m.sysprepQ) > 0 {
		// The background sysprep finishes after the script.
		args := m.sysprepQ
		m.sysprepQ = nil
		m.sysprep(args)
	}
	return r
}

// RunFile runs the script at path on the machine.
func (m *Machine) RunFile(path string) Result {
	f := m.fs.file(path)
	if f == nil {
		return Result{Exit: 1, Err: fmt.Errorf("the file %s does not exist", path)}
	}
	return m.Run(string(f.Data), base(path))
}

// Boot starts the machine again after a restart: it returns the tasks
// triggered at startup that Task Scheduler starts (not, on battery, those
// whose settings forbid it).
func (m *Machine) Boot() []*Task {
	m.Halted = ""
	if n, ok := m.Env["pendingcomputername"]; ok {
		m.ComputerName, m.Env["computername"] = n, n
		delete(m.Env, "pendingcomputername")
	}
	var out []*Task
	for _, name := range slices.Sorted(maps.Keys(m.Tasks)) {
		t := m.Tasks[name]
		if !t.AtStartup {
			continue
		}
		if m.OnBattery && t.DisallowStartIfOnBatteries {
			m.Log = append(m.Log, "Task Scheduler: "+t.Name+" not started: the machine is on batteries")
			continue
		}
		out = append(out, t)
	}
	for _, svc := range m.Services {
		if svc.StartType == "Automatic" {
			svc.Status = "Running"
		} else {
			svc.Status = "Stopped"
		}
	}
	return out
}

// RunTask runs a task's action when it is powershell.exe -File.
func (m *Machine) RunTask(t *Task) Result {
	if !strings.EqualFold(base(t.Execute), "powershell.exe") {
		return Result{Exit: 1, Err: fmt.Errorf("task %s runs %s, which the model cannot run", t.Name, t.Execute)}
	}
	f := strings.Fields(t.Argument)
	for i, a := range f {
		if strings.EqualFold(a, "-File") && i+1 < len(f) {
			return m.RunFile(strings.Trim(f[i+1], `"`))
		}
	}
	return Result{Exit: 1, Err: fmt.Errorf("task %s: no -File in %q", t.Name, t.Argument)}
}

func (m *Machine) halt(why string) error {
	m.Halted = why
	return haltSignal{why}
}

// ---- .NET

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

// ---- cmdlets

func (m *Machine) runCmdlet(c *call) (any, error) {
	name := strings.ToLower(c.Name)
	m.Log = append(m.Log, c.Name)
	mod, verb, ok := strings.Cut(name, `\`)
	if !ok {
		verb, mod = name, ""
	}
	fn, ok := cmdlets[verb]
	if !ok || (mod != "" && !strings.EqualFold(fn.module, mod) && !(verb == "add-mppreference" && mod == "defender")) {
		return nil, fmt.Errorf("pssim: the model has no command %s", c.Name)
	}
	return fn.run(m, c)
}

type cmdlet struct {
	module string
	run    func(m *Machine, c *call) (any, error)
}

var cmdlets map[string]cmdlet

func init() {
	mgmt, util, core := "microsoft.powershell.management", "microsoft.powershell.utility", "microsoft.powershell.core"
	none := func(*Machine, *call) (any, error) { return nil, nil }
	cmdlets = map[string]cmdlet{
		"new-item":            {mgmt, (*Machine).newItem},
		"new-itemproperty":    {mgmt, (*Machine).newItemProperty},
		"remove-itemproperty": {mgmt, (*Machine).removeItemProperty},
		"get-itemproperty":    {mgmt, (*Machine).getItemProperty},
		"copy-item":           {mgmt, (*Machine).copyItem},
		"set-content":         {mgmt, (*Machine).setContent},
		"get-content":         {mgmt, (*Machine).getContent},
		"remove-item":         {mgmt, (*Machine).removeItem},
		"test-path":           {mgmt, (*Machine).testPath},
		"join-path":           {mgmt, func(_ *Machine, c *call) (any, error) { return join(str(c.Pos(0)), str(c.Pos(1))), nil }},
		"split-path": {mgmt, func(_ *Machine, c *call) (any, error) {
			p := str(c.Pos(0))
			if c.Has("Path") {
				p = c.Str("Path")
			}
			if c.Switch("Leaf") {
				return base(p), nil
			}
			return parent(p), nil
		}},
		"get-childitem":    {mgmt, (*Machine).getChildItem},
		"get-item":         {mgmt, (*Machine).getItem},
		"get-service":      {mgmt, (*Machine).getService},
		"set-service":      {mgmt, (*Machine).setService},
		"start-service":    {mgmt, (*Machine).startService},
		"restart-service":  {mgmt, (*Machine).startService},
		"stop-service":     {mgmt, (*Machine).stopService},
		"restart-computer": {mgmt, func(m *Machine, _ *call) (any, error) { return nil, m.halt("restart") }},
		"stop-computer":    {mgmt, func(m *Machine, _ *call) (any, error) { return nil, m.halt("poweroff") }},
		"rename-computer": {mgmt, func(m *Machine, c *call) (any, error) {
			m.Env["pendingcomputername"] = c.Str("NewName")
			return nil, nil
		}},
		"start-process":    {mgmt, (*Machine).startProcess},
		"write-output":     {util, func(_ *Machine, c *call) (any, error) { return unwrap(append(c.input, c.pos...)), nil }},
		"out-string":       {util, func(_ *Machine, c *call) (any, error) { return outString(c.input), nil }},
		"convertfrom-json": {util, convertFromJSON},
		"select-object":    {util, selectObject},
		"new-object":       {util, (*Machine).newObject},
		"start-sleep":      {util, none},
		"new-timespan": {util, func(_ *Machine, c *call) (any, error) {
			return newObject("TimeSpan", "Minutes", c.Arg("Minutes"), "Hours", c.Arg("Hours")), nil
		}},
		"out-null":         {core, none},
		"where-object":     {core, whereObject},
		"foreach-object":   {core, forEachObject},
		"get-command":      {core, (*Machine).getCommand},
		"start-transcript": {"microsoft.powershell.host", none},
		"stop-transcript":  {"microsoft.powershell.host", none},
		"get-volume":       {"storage", (*Machine).getVolume},
		"get-partition":    {"storage", (*Machine).getPartition},
		"resize-partition": {"storage", (*Machine).resizePartition},
		"update-disk":      {"storage", none},
		"get-partitionsupportedsize": {"storage", func(m *Machine, c *call) (any, error) {
			return newObject("PartitionSupportedSize", "SizeMin", 8<<30, "SizeMax", int(m.DiskBytes-600<<20)), nil
		}},
		"register-scheduledtask": {"scheduledtasks", (*Machine).registerTask},
		"unregister-scheduledtask": {"scheduledtasks", func(m *Machine, c *call) (any, error) {
			delete(m.Tasks, strings.ToLower(c.Str("TaskName")))
			return nil, nil
		}},
		"new-scheduledtaskaction": {"scheduledtasks", func(_ *Machine, c *call) (any, error) {
			return newObject("Action", "Execute", c.Str("Execute"), "Arguments", c.Str("Argument")), nil
		}},
		"new-scheduledtasktrigger": {"scheduledtasks", func(_ *Machine, c *call) (any, error) {
			return newObject("Trigger", "AtStartup", c.Switch("AtStartup")), nil
		}},
		"new-scheduledtasksettingsset": {"scheduledtasks", func(_ *Machine, c *call) (any, error) { return newSettings(c), nil }},
		"enable-windowsoptionalfeature": {"dism", func(m *Machine, c *call) (any, error) {
			m.Features = append(m.Features, c.Str("FeatureName"))
			return nil, nil
		}},
		"new-netfirewallrule": {"netsecurity", func(m *Machine, c *call) (any, error) {
			m.Registry["firewall:"+strings.ToLower(c.Str("Name"))] = map[string]any{}
			return nil, nil
		}},
		"get-netfirewallrule":        {"netsecurity", (*Machine).getFirewallRule},
		"get-netadapter":             {"netadapter", (*Machine).getNetAdapter},
		"set-netipinterface":         {"nettcpip", none},
		"get-netipaddress":           {"nettcpip", none},
		"remove-netipaddress":        {"nettcpip", none},
		"get-netroute":               {"nettcpip", none},
		"remove-netroute":            {"nettcpip", none},
		"new-netipaddress":           {"nettcpip", none},
		"set-dnsclientserveraddress": {"dnsclient", none},
		"add-mppreference": {"configdefender", func(m *Machine, _ *call) (any, error) {
			if !m.Defender {
				return nil, winErr("Add-MpPreference: Defender is not installed")
			}
			if m.DefenderStarting > 0 {
				m.DefenderStarting--
				return nil, winErr("Operation failed with the following error: 0x800106ba")
			}
			return nil, nil
		}},
	}
}

// paths are the cmdlet's -LiteralPath, -Path or first argument, with
// -Path's wildcards resolved.
func (m *Machine) paths(c *call) []string {
	var out []string
	if c.Has("LiteralPath") {
		for _, p := range asList(c.Arg("LiteralPath")) {
			out = append(out, cleanPath(str(p)))
		}
		return out
	}
	var raw []any
	if c.Has("Path") {
		raw = asList(c.Arg("Path"))
	} else {
		raw = asList(c.Pos(0))
	}
	for _, p := range raw {
		s := cleanPath(str(p))
		if strings.ContainsAny(base(s), "*?") {
			out = append(out, m.fs.glob(s)...)
		} else {
			out = append(out, s)
		}
	}
	return out
}

func isRegistry(p string) bool { return strings.HasPrefix(strings.ToUpper(p), "HKLM:") }

func (m *Machine) newItem(c *call) (any, error) {
	var made []any
	for _, p := range m.paths(c) {
		switch {
		case isRegistry(p):
			if !m.keyExists(parent(p)) {
				return nil, nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", parent(p))}
			}
			if m.keyExists(p) {
				if !c.Switch("Force") {
					return nil, nonTerminating{"A key at this path already exists."}
				}
				// RegistryProvider.NewItem: with -Force an existing key is
				// removed before the new one is made.
				for k := range m.Registry {
					if k == key(p) || strings.HasPrefix(k, key(p)+`\`) {
						delete(m.Registry, k)
					}
				}
			}
			m.Registry[key(p)] = map[string]any{}
		case strings.EqualFold(c.Str("ItemType"), "Directory"):
			if m.fs.file(p) != nil {
				return nil, nonTerminating{fmt.Sprintf("An item with the specified name %s already exists.", p)}
			}
			if m.fs.isDir(p) && !c.Switch("Force") {
				return nil, nonTerminating{fmt.Sprintf("An item with the specified name %s already exists.", p)}
			}
			m.fs.mkdirAll(p)
			made = append(made, &fileItem{m.fs, p})
		default:
			if err := m.fs.write(p, []byte(c.Str("Value")), c.Switch("Force")); err != nil {
				return nil, err
			}
			made = append(made, &fileItem{m.fs, p})
		}
	}
	return unwrap(made), nil
}

// keyExists: the key, or a key under it, is in the registry (the model
// holds keys with values; their parents exist too), or it is the hive.
func (m *Machine) keyExists(p string) bool {
	k := strings.TrimRight(key(p), `\:`)
	if k == "hklm" {
		return true
	}
	for have := range m.Registry {
		if have == k || strings.HasPrefix(have, k+`\`) {
			return true
		}
	}
	return false
}

func (m *Machine) newItemProperty(c *call) (any, error) {
	for _, p := range m.paths(c) {
		k, ok := m.Registry[key(p)]
		if !ok {
			return nil, nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", p)}
		}
		name := c.Str("Name")
		if _, exists := k[name]; exists && !c.Switch("Force") {
			return nil, nonTerminating{"The property already exists."}
		}
		k[name] = c.Arg("Value")
	}
	return nil, nil
}

func (m *Machine) getItemProperty(c *call) (any, error) {
	var out []any
	for _, p := range m.paths(c) {
		k, ok := m.Registry[key(p)]
		if !ok {
			return nil, nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", p)}
		}
		o := newObject("PSCustomObject")
		for name, v := range k {
			o.set(name, v)
		}
		out = append(out, o)
	}
	return unwrap(out), nil
}

func (m *Machine) removeItemProperty(c *call) (any, error) {
	for _, p := range m.paths(c) {
		k, ok := m.Registry[key(p)]
		if _, has := k[c.Str("Name")]; !ok || !has {
			return nil, nonTerminating{fmt.Sprintf("Property %s does not exist at path %s.", c.Str("Name"), p)}
		}
		delete(k, c.Str("Name"))
	}
	return nil, nil
}

// RegistryValue is a registry value, or nil.
func (m *Machine) RegistryValue(path, name string) any { return m.Registry[key(path)][name] }

// copyItem is Copy-Item: a file copies as CopyFile does; a directory
// with -Recurse copies into an existing destination directory, or
// becomes the destination.
func (m *Machine) copyItem(c *call) (any, error) {
	srcs := m.paths(c)
	if len(srcs) == 0 {
		return nil, nonTerminating{"Cannot find path because it does not exist."}
	}
	dst := cleanPath(c.Str("Destination"))
	force := c.Switch("Force")
	for _, src := range srcs {
		if !m.fs.exists(src) {
			return nil, nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", src)}
		}
		target := dst
		if m.fs.isDir(dst) {
			target = join(dst, base(src))
		}
		if m.fs.isDir(src) {
			if !c.Switch("Recurse") {
				m.fs.mkdirAll(target)
				continue
			}
			if err := m.fs.copyTree(src, target, force); err != nil {
				return nil, err
			}
			continue
		}
		if err := m.fs.copyFile(src, target, force); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (m *Machine) setContent(c *call) (any, error) {
	v := c.Arg("Value")
	if !c.Has("Value") {
		v = unwrap(c.input)
	}
	text := str(v)
	if list, ok := v.([]any); ok {
		parts := make([]string, len(list))
		for i, x := range list {
			parts[i] = str(x)
		}
		text = strings.Join(parts, "\r\n")
	}
	for _, p := range m.paths(c) {
		if err := m.fs.write(p, []byte(text+"\r\n"), c.Switch("Force")); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (m *Machine) getContent(c *call) (any, error) {
	var out []any
	for _, p := range m.paths(c) {
		f := m.fs.file(p)
		if f == nil {
			return nil, nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", p)}
		}
		if c.Switch("Raw") {
			out = append(out, string(f.Data))
			continue
		}
		lines := strings.Split(strings.TrimRight(strings.ReplaceAll(string(f.Data), "\r\n", "\n"), "\n"), "\n")
		if c.Has("Tail") && toInt(c.Arg("Tail")) < len(lines) {
			lines = lines[len(lines)-toInt(c.Arg("Tail")):]
		}
		for _, l := range lines {
			out = append(out, l)
		}
	}
	return unwrap(out), nil
}

func (m *Machine) removeItem(c *call) (any, error) {
	paths := m.paths(c)
	for _, p := range paths {
		if isRegistry(p) {
			delete(m.Registry, key(p))
			continue
		}
		if err := m.fs.remove(p, c.Switch("Recurse"), c.Switch("Force")); err != nil {
			return nil, err
		}
	}
	if len(paths) == 0 && c.Has("LiteralPath") {
		return nil, nonTerminating{"Cannot find path because it does not exist."}
	}
	return nil, nil
}

func (m *Machine) testPath(c *call) (any, error) {
	paths := m.paths(c)
	if len(paths) == 0 {
		return false, nil
	}
	if isRegistry(paths[0]) {
		return m.keyExists(paths[0]), nil
	}
	return m.fs.exists(paths[0]), nil
}

func (m *Machine) getChildItem(c *call) (any, error) {
	var out []any
	for _, dir := range m.paths(c) {
		if !m.fs.isDir(dir) {
			return nil, nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", dir)}
		}
		var list []string
		if c.Switch("Recurse") {
			for _, f := range m.fs.walk(dir) {
				list = append(list, f.Path)
			}
		} else {
			list = m.fs.children(dir)
		}
		filter := c.Str("Filter")
		for _, p := range list {
			if c.Switch("File") && m.fs.isDir(p) {
				continue
			}
			if filter != "" && !wildcard(filter).MatchString(base(p)) {
				continue
			}
			out = append(out, &fileItem{m.fs, p})
		}
	}
	return unwrap(out), nil
}

func (m *Machine) getItem(c *call) (any, error) {
	var out []any
	for _, p := range m.paths(c) {
		if !m.fs.exists(p) {
			return nil, nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", p)}
		}
		out = append(out, &fileItem{m.fs, p})
	}
	return unwrap(out), nil
}

func (m *Machine) service(name string) *Service { return m.Services[strings.ToLower(name)] }

func (m *Machine) getService(c *call) (any, error) {
	var out []any
	for _, n := range asList(c.Arg("Name")) {
		s := m.service(str(n))
		if s == nil {
			return nil, nonTerminating{fmt.Sprintf("Cannot find any service with service name '%s'.", str(n))}
		}
		out = append(out, newObject("ServiceController", "Name", s.Name, "Status", s.Status, "StartType", s.StartType))
	}
	return unwrap(out), nil
}

func (m *Machine) setService(c *call) (any, error) {
	s := m.service(c.Str("Name"))
	if s == nil {
		return nil, nonTerminating{fmt.Sprintf("Service %s was not found on computer '.'.", c.Str("Name"))}
	}
	if c.Has("StartupType") {
		s.StartType = c.Str("StartupType")
	}
	return nil, nil
}

func (m *Machine) stopService(c *call) (any, error) {
	s := m.service(c.Str("Name"))
	if s == nil {
		return nil, nonTerminating{fmt.Sprintf("Cannot find any service with service name '%s'.", c.Str("Name"))}
	}
	s.Status = "Stopped"
	return nil, nil
}

// startService starts a service; sshd's first start makes its
// configuration as sshd does: CopyFileW of sshd_config_default beside
// sshd.exe (which keeps a read-only attribute), and host keys.
func (m *Machine) startService(c *call) (any, error) {
	s := m.service(c.Str("Name"))
	if s == nil {
		return nil, nonTerminating{fmt.Sprintf("Cannot find any service with service name '%s'.", c.Str("Name"))}
	}
	if s.StartType == "Disabled" {
		return nil, nonTerminating{fmt.Sprintf("Service '%s' cannot be started because it is disabled.", s.Name)}
	}
	if strings.EqualFold(s.Name, "sshd") {
		dir := `C:\ProgramData\ssh`
		m.fs.mkdirAll(dir)
		cfg := join(dir, "sshd_config")
		if m.fs.file(cfg) == nil {
			if err := m.fs.copyFile(join(parent(s.BinPath), "sshd_config_default"), cfg, false); err != nil {
				return nil, winErr("Failed to start service 'OpenSSH SSH Server (sshd)': %v", err)
			}
		}
		for _, k := range []string{"ssh_host_ed25519_key", "ssh_host_ecdsa_key", "ssh_host_rsa_key"} {
			if m.fs.file(join(dir, k)) == nil {
				_ = m.fs.write(join(dir, k), []byte("host key"), false)
			}
		}
	}
	s.Status = "Running"
	return nil, nil
}

func (m *Machine) getCommand(c *call) (any, error) {
	if strings.EqualFold(c.Str("Name"), "Add-MpPreference") && m.Defender {
		return newObject("CmdletInfo", "Name", "Add-MpPreference", "ModuleName", "ConfigDefender"), nil
	}
	return nil, nonTerminating{fmt.Sprintf("The term '%s' is not recognized as the name of a cmdlet.", c.Str("Name"))}
}

func (m *Machine) getVolume(c *call) (any, error) {
	for _, letter := range slices.Sorted(maps.Keys(m.volumes)) {
		if strings.EqualFold(m.volumes[letter], c.Str("FileSystemLabel")) || (c.Has("DriveLetter") && strings.EqualFold(c.Str("DriveLetter"), letter)) {
			return newObject("Volume", "DriveLetter", letter, "FileSystemLabel", m.volumes[letter]), nil
		}
	}
	return nil, nonTerminating{fmt.Sprintf("No MSFT_Volume objects found with property 'FileSystemLabel' equal to '%s'.", c.Str("FileSystemLabel"))}
}

func (m *Machine) getPartition(c *call) (any, error) {
	if !strings.EqualFold(c.Str("DriveLetter"), "C") {
		return nil, nonTerminating{"No MSFT_Partition objects found."}
	}
	return newObject("Partition", "DriveLetter", "C", "DiskNumber", 0, "PartitionNumber", 4, "Size", int(m.PartitionBytes)), nil
}

func (m *Machine) resizePartition(c *call) (any, error) {
	size := int64(toInt(c.Arg("Size")))
	if size > m.DiskBytes-600<<20 {
		return nil, winErr("Size Not Supported")
	}
	if size == m.PartitionBytes {
		return nil, winErr("The size of the extent is less than the minimum of 1MB.")
	}
	m.PartitionBytes = size
	return nil, nil
}

func (m *Machine) getFirewallRule(c *call) (any, error) {
	if _, ok := m.Registry["firewall:"+strings.ToLower(c.Str("Name"))]; ok {
		return newObject("FirewallRule", "Name", c.Str("Name")), nil
	}
	return nil, nonTerminating{fmt.Sprintf("No MSFT_NetFirewallRule objects found with property 'InstanceID' equal to '%s'.", c.Str("Name"))}
}

func (m *Machine) getNetAdapter(c *call) (any, error) {
	var out []any
	for i, st := range m.Adapters {
		out = append(out, newObject("NetAdapter", "Name", fmt.Sprintf("Ethernet %d", i+1), "ifIndex", 6+i, "Status", st))
	}
	return unwrap(out), nil
}

func (m *Machine) registerTask(c *call) (any, error) {
	name := c.Str("TaskName")
	if _, ok := m.Tasks[strings.ToLower(name)]; ok && !c.Switch("Force") {
		return nil, winErr("Cannot create a file when that file already exists.")
	}
	act, _ := c.Arg("Action").(*Object)
	trig, _ := c.Arg("Trigger").(*Object)
	if act == nil || trig == nil {
		return nil, winErr("Register-ScheduledTask: the model wants -Action and -Trigger")
	}
	set, _ := c.Arg("Settings").(*Object)
	if set == nil {
		set = newSettings(&call{named: map[string]any{}})
	}
	t := &Task{
		Name: name, Execute: str(act.Get("Execute")), Argument: str(act.Get("Arguments")), AtStartup: truthy(trig.Get("AtStartup")),
		DisallowStartIfOnBatteries: truthy(set.Get("DisallowStartIfOnBatteries")), StopIfGoingOnBatteries: truthy(set.Get("StopIfGoingOnBatteries")),
		RunOnlyIfIdle: truthy(set.Get("RunOnlyIfIdle")), RunOnlyIfNetworkAvailable: truthy(set.Get("RunOnlyIfNetworkAvailable")),
		RestartCount: toInt(set.Get("RestartCount")),
	}
	m.Tasks[strings.ToLower(name)] = t
	return newObject("ScheduledTask", "TaskName", name), nil
}

// newSettings is New-ScheduledTaskSettingsSet: Task Scheduler's defaults
// (the task does not start on batteries and stops when the machine goes
// onto them) unless the switches say otherwise.
func newSettings(c *call) *Object {
	return newObject("TaskSettings",
		"DisallowStartIfOnBatteries", !c.Switch("AllowStartIfOnBatteries"),
		"StopIfGoingOnBatteries", !c.Switch("DontStopIfGoingOnBatteries"),
		"RunOnlyIfIdle", c.Switch("RunOnlyIfIdle"),
		"RunOnlyIfNetworkAvailable", c.Switch("RunOnlyIfNetworkAvailable"),
		"RestartCount", toInt(c.Arg("RestartCount")))
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

func outString(in []any) string {
	var b strings.Builder
	for _, x := range in {
		b.WriteString(str(x))
		b.WriteString("\r\n")
	}
	return b.String()
}

func convertFromJSON(_ *Machine, c *call) (any, error) {
	var v any
	if err := json.Unmarshal([]byte(str(unwrap(c.input))), &v); err != nil {
		return nil, winErr("ConvertFrom-Json: %v", err)
	}
	return fromJSON(v), nil
}

func fromJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		o := newObject("PSCustomObject")
		for k, e := range x {
			o.set(k, fromJSON(e))
		}
		return o
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromJSON(e)
		}
		return out
	case float64:
		return int(x)
	}
	return v
}

func selectObject(_ *Machine, c *call) (any, error) {
	if c.Has("First") {
		n := toInt(c.Arg("First"))
		if n < len(c.input) {
			return unwrap(c.input[:n]), nil
		}
		return unwrap(c.input), nil
	}
	return nil, errors.New("pssim: Select-Object without -First")
}

// whereObject supports "Where-Object Prop -op value" and a script block.
func whereObject(m *Machine, c *call) (any, error) {
	var out []any
	for _, item := range c.input {
		keep := false
		if sb, ok := c.Pos(0).(scriptBlock); ok {
			v, err := c.in.withItem(sb, item, c.sc)
			if err != nil {
				return nil, err
			}
			keep = truthy(v)
		} else {
			prop := str(c.Pos(0))
			var op string
			for k := range c.named {
				if k != "erroraction" {
					op = k
				}
			}
			v, err := c.in.binary("-"+op, property(item, prop), c.named[op])
			if err != nil {
				return nil, err
			}
			keep = truthy(v)
		}
		if keep {
			out = append(out, item)
		}
	}
	return unwrap(out), nil
}

func forEachObject(m *Machine, c *call) (any, error) {
	sb, ok := c.Pos(0).(scriptBlock)
	if !ok {
		return nil, errors.New("pssim: ForEach-Object without a script block")
	}
	var out []any
	for _, item := range c.input {
		v, err := c.in.withItem(sb, item, c.sc)
		if err != nil {
			return nil, err
		}
		out = append(out, asList(v)...)
	}
	return unwrap(out), nil
}

// withItem runs a script block with $_ set to item.
func (in *interp) withItem(sb scriptBlock, item any, parent *scope) (any, error) {
	body, err := parse(sb.src)
	if err != nil {
		return nil, in.fail("pssim: %v", err)
	}
	sc := newScope(parent)
	sc.set("_", item)
	out, err := in.runBlock(body, sc)
	return unwrap(out), err
}

// winMsg is an error as Windows or PowerShell words it, capitals and
// full stop included, since scripts and tests read these messages.
type winMsg string

func (w winMsg) Error() string { return string(w) }

func winErr(format string, args ...any) error { return winMsg(fmt.Sprintf(format, args...)) }
