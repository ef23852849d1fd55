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
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

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
	// Warnings are the warnings the scripts' commands wrote (services.go).
	Warnings []string
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
	// SysprepCachesDisc makes sysprep's generalize pass cache a disc's
	// Autounattend.xml in Panther: what nobody has seen it do, and what
	// the build must catch if it ever does (review 6, A2).
	SysprepCachesDisc bool
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
	// AdminPassword is the Administrator's password a clone's Setup set
	// from its answer file (FirstBoot).
	AdminPassword string
	// Halted is "restart" or "poweroff" once the machine went down.
	Halted string
	// Features are the optional features enabled; FeatureChanges every
	// change to them, in order ("enable X", "disable Y"), through DISM's
	// cmdlets and dism.exe alike.
	Features       []string
	FeatureChanges []string
	// DiskBytes and PartitionBytes: C:'s disk and partition sizes.
	DiskBytes, PartitionBytes int64
	// Adapters are the physical network adapters' states.
	Adapters []string
	// Firewall are the inbound firewall rules by lower-case name, and
	// NetworkCategory the profile of the machine's network: Public for
	// the network of a static address with no domain (Windows files an
	// unidentified network as Public).
	Firewall        map[string]*FirewallRule
	NetworkCategory string
	// Updates are the update packages DISM knows, by lower-case file
	// name (dism.go); Packages every dism.exe /add-package, in order, as
	// "NAME: STATUS"; PendingUBR the revision the updates installed wait
	// for the next boot to give Windows.
	Updates    map[string]*Update
	Packages   []string
	PendingUBR int

	sshHostKeys []string // the host keys the running sshd loaded (sshd.go)

	running  map[string]bool   // tasks running at this boot, by lower-case name
	started  []string          // tasks started at this boot (FirstBoot)
	volumes  map[string]string // drive letter -> label
	methods  map[string]func(*Object, []any) (any, error)
	statics  map[string]func([]any) (any, error)
	sysprepQ []string // a sysprep started in the background
}

// NewServer2025 is a Windows Server 2025 Datacenter (Server Core) just
// installed: a 2022 but for its build and OpenSSH's server, which 2025
// has preinstalled (in System32\OpenSSH) with its firewall rule
// OpenSSH-Server-In-TCP enabled for the Domain and Private profiles only
// (OpenNebula/one-apps#345: "inbound SSH is dropped on Public networks").
// Its sshd service is modelled Disabled: whether 2025 ships it Disabled
// or Manual nobody here has seen, and Disabled is the one a script must
// cope with (Start-Service fails on it).
func NewServer2025() *Machine {
	m := NewServer2022()
	m.Build = 26100
	// A Windows Server 2025 release revision (26100.1742 is the one its
	// media are known by here; the model needs only some revision).
	m.Registry[key(CurrentVersion)] = map[string]any{"CurrentBuild": "26100", "CurrentBuildNumber": "26100", "UBR": 1742}
	dir := `C:\Windows\System32\OpenSSH`
	m.fs.mkdirAll(dir)
	for _, f := range []string{"sshd.exe", "ssh-agent.exe", "sftp-server.exe"} {
		m.WriteFile(join(dir, f), []byte("MZ"))
	}
	m.WriteFile(join(dir, "sshd_config_default"), []byte(SSHDConfigDefault))
	m.Services["sshd"] = &Service{Name: "sshd", DisplayName: "OpenSSH SSH Server", Status: "Stopped", StartType: "Disabled", BinPath: join(dir, "sshd.exe")}
	m.Firewall["openssh-server-in-tcp"] = &FirewallRule{Name: "OpenSSH-Server-In-TCP", DisplayName: "OpenSSH SSH Server (sshd)",
		Protocol: "TCP", LocalPort: 22, Enabled: true, Allow: true, Profiles: []string{"Domain", "Private"}}
	return m
}

// SSHDConfigDefault is the part of Win32-OpenSSH's sshd_config_default
// (openssh-portable contrib/win32/openssh/sshd_config) that hwk's build
// edits.
const SSHDConfigDefault = `#PubkeyAuthentication yes
#PasswordAuthentication yes
# override default of no subsystems
Subsystem	sftp	sftp-server.exe

Match Group administrators
       AuthorizedKeysFile __PROGRAMDATA__/ssh/administrators_authorized_keys
`

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
			// The evaluation ISO's release, never patched (review 4, D5).
			key(CurrentVersion): {"CurrentBuild": "20348", "CurrentBuildNumber": "20348", "UBR": 169},
		},
		Services: map[string]*Service{
			"wuauserv": {Name: "wuauserv", DisplayName: "Windows Update", Status: "Running", StartType: "Manual"},
			"winrm":    {Name: "WinRM", DisplayName: "Windows Remote Management (WS-Management)", Status: "Running", StartType: "Automatic"},
		},
		Tasks:           map[string]*Task{},
		Build:           20348,
		ComputerName:    "WIN-HWKBUILD",
		Defender:        true,
		DiskBytes:       40 << 30,
		Adapters:        []string{"Up"},
		Firewall:        map[string]*FirewallRule{},
		NetworkCategory: "Public",
		volumes:         map[string]string{"C": ""},
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
	m.sshDirFixture(p)
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

// discs are the drive letters of the machine's discs (every volume but
// the system disk's), in drive-letter order.
func (m *Machine) discs() []string {
	var out []string
	for _, letter := range slices.Sorted(maps.Keys(m.volumes)) {
		if letter != "C" {
			out = append(out, letter)
		}
	}
	return out
}

// EjectCD takes the disc out of drive: its files and its volume go.
func (m *Machine) EjectCD(drive string) {
	root := strings.ToLower(drive + `:\`)
	delete(m.volumes, strings.ToUpper(drive))
	for k := range m.fs.files {
		if strings.HasPrefix(k, root) {
			delete(m.fs.files, k)
		}
	}
	for k := range m.fs.dirs {
		if strings.HasPrefix(k, root) && k != root {
			delete(m.fs.dirs, k)
		}
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
	m.finishUpdates()
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
	m.bootServices()
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

// winMsg is an error as Windows or PowerShell words it, capitals and
// full stop included, since scripts and tests read these messages.
type winMsg string

func (w winMsg) Error() string { return string(w) }

func winErr(format string, args ...any) error { return winMsg(fmt.Sprintf(format, args...)) }

// hyperVParts are the features that come with Microsoft-Hyper-V on
// Windows Server: after `dism /enable-feature /featurename:Microsoft-Hyper-V
// /all`, Get-WindowsOptionalFeature lists Microsoft-Hyper-V-Offline and
// Microsoft-Hyper-V-Online Enabled too (the hypervisor, which a guest
// without nested virtualization cannot start: sig-windows-tools
// Install-Containerd.ps1 disables Microsoft-Hyper-V-Online for that).
var hyperVParts = []string{"Microsoft-Hyper-V-Offline", "Microsoft-Hyper-V-Online"}

// changeFeature enables or disables an optional feature.
func (m *Machine) changeFeature(enable bool, name string) {
	verb := "disable"
	if enable {
		verb = "enable"
	}
	m.FeatureChanges = append(m.FeatureChanges, verb+" "+name)
	names := []string{name}
	if enable && strings.EqualFold(name, "Microsoft-Hyper-V") {
		names = append(names, hyperVParts...)
	}
	for _, n := range names {
		m.Features = slices.DeleteFunc(m.Features, func(f string) bool { return strings.EqualFold(f, n) })
		if enable {
			m.Features = append(m.Features, n)
		}
	}
}
