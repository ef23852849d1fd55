package pssim

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"
)

// defaultContainerdConfig is what `containerd.exe config default`
// prints: the real output of containerd for windows/amd64 at the version
// node-images/windows/components.yaml pins, made under Wine by
// hack/containerd-config-default.sh (how: the .txt beside it). Its
// version is checked against the pin (containerd_test.go); a pin bump
// reruns the script and renames the file here.
//
//go:embed testdata/containerd-v2.3.1-config-default-windows.toml
var defaultContainerdConfig string

// wineContainerdPlatform is the one machine-dependent line's value in
// defaultContainerdConfig: containerd's default platform carries the
// build number Windows reports, Wine's when the file was made.
const wineContainerdPlatform = "windows(10.0.19043)/amd64"

// containerdConfig is defaultContainerdConfig as m prints it: with m's
// build in the default platform, as on the Windows m models.
func (m *Machine) containerdConfig() string {
	return strings.Replace(defaultContainerdConfig, wineContainerdPlatform, fmt.Sprintf("windows(10.0.%d)/amd64", m.Build), 1)
}

// runNative runs a program (or a .ps1 file) named by c.Name with c.raw.
// It sets $LASTEXITCODE and returns the program's output lines.
func (m *Machine) runNative(c *call) (any, error) {
	prog := c.Name
	lower := strings.ToLower(base(prog))
	m.Log = append(m.Log, strings.TrimSpace(prog+" "+strings.Join(c.raw, " ")))
	if strings.Contains(prog, `\`) && m.fs.file(prog) == nil {
		return nil, winErr("The term '%s' is not recognized as the name of a cmdlet, function, script file, or operable program.", prog)
	}
	if strings.HasSuffix(lower, ".ps1") {
		return m.runScriptFile(c, prog)
	}
	code, out, err := m.program(lower, prog, c.raw, c.sc)
	if err != nil {
		return nil, err
	}
	if code < 0 {
		// A GUI program, not waited for: $LASTEXITCODE stays.
		return nil, nil
	}
	setExit(c.sc, code)
	return unwrap(out), nil
}

func setExit(sc *scope, code int) {
	root := sc
	for root.parent != nil {
		root = root.parent
	}
	root.set("LASTEXITCODE", code)
}

// program runs one program: its exit status (-1: not waited for), its
// output lines.
func (m *Machine) program(lower, prog string, args []string, sc *scope) (int, []any, error) {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch lower {
	case "dism.exe":
		return m.dism(args, sc)
	case "netsh.exe", "wevtutil.exe":
		return 0, nil, nil
	case "schtasks.exe":
		code, out := m.schtasks(args)
		return code, out, nil
	case "sc.exe":
		return m.sc(args)
	case "icacls.exe":
		return m.icacls(args)
	case "attrib.exe":
		clear := false
		var target string
		for _, a := range args {
			switch {
			case strings.EqualFold(a, "-R"):
				clear = true
			case strings.HasPrefix(a, "/"), strings.HasPrefix(a, "+"), strings.HasPrefix(a, "-"):
			default:
				target = a
			}
		}
		if !clear || target == "" {
			return 1, nil, nil
		}
		dir, pat := parent(target), base(target)
		re := wildcard(pat)
		for _, f := range m.fs.walk(dir) {
			if re.MatchString(base(f.Path)) {
				f.ReadOnly = false
			}
		}
		return 0, nil, nil
	case "containerd.exe":
		switch {
		case arg(0) == "config" && arg(1) == "default":
			// One string per line, as PowerShell reads a program's
			// output (asList of the []string would be one object).
			var out []any
			for _, l := range strings.Split(strings.TrimSuffix(m.containerdConfig(), "\n"), "\n") {
				out = append(out, l)
			}
			return 0, out, nil
		case arg(0) == "--register-service":
			return m.registerContainerd(prog)
		}
	case "ctr.exe":
		last := arg(len(args) - 1)
		if m.fs.file(last) == nil {
			return 1, []any{"ctr: open " + last + ": The system cannot find the file specified."}, nil
		}
		return 0, nil, nil
	case "sysprep.exe":
		// A GUI program: & starts it and goes on (PowerShell runs a
		// windows-subsystem program last in a pipeline in the background).
		m.sysprepQ = args
		return -1, nil, nil
	case "powershell.exe":
		// -EncodedCommand and -Command: ssh.go.
		if code, out, ok, err := m.childPowerShell(args, sc); ok {
			return code, out, err
		}
		for i, a := range args {
			if strings.EqualFold(a, "-File") && i+1 < len(args) {
				r := m.runChildScript(args[i+1])
				var out []any
				for _, l := range r.Output {
					out = append(out, l)
				}
				if r.Err != nil {
					out = append(out, r.Err.Error())
				}
				return r.Exit, out, nil
			}
		}
	}
	return 0, nil, fmt.Errorf("pssim: the model cannot run %s %s", prog, strings.Join(args, " "))
}

// runScriptFile runs a .ps1 with & in the caller's session: a child
// scope, so its preferences and errors are the caller's problem.
func (m *Machine) runScriptFile(c *call, path string) (any, error) {
	if strings.EqualFold(base(path), "install-sshd.ps1") {
		if err := m.installSSHD(path); err != nil {
			// A .NET exception under the script's 'Stop': terminating.
			return nil, &PSError{Message: err.Error(), Script: c.in.script, Line: c.in.line}
		}
		return nil, nil
	}
	f := m.fs.file(path)
	body, err := parse(string(f.Data))
	if err != nil {
		return nil, fmt.Errorf("pssim cannot read %s: %v", path, err)
	}
	out, err := c.in.runBlock(body, newScope(c.sc))
	if errors.As(err, new(returnSignal)) || errors.As(err, new(exitSignal)) {
		err = nil
	}
	return unwrap(out), err
}

// runChildScript is powershell.exe -File path: a new process, whose
// uncaught error is exit status 1.
func (m *Machine) runChildScript(path string) Result {
	if strings.EqualFold(base(path), "install-sshd.ps1") {
		if m.fs.file(path) == nil {
			return Result{Exit: 1, Err: fmt.Errorf("the argument '%s' to the -File parameter does not exist", path)}
		}
		if err := m.installSSHD(path); err != nil {
			return Result{Exit: 1, Err: err}
		}
		return Result{Output: []string{"[SC] SetServiceObjectSecurity SUCCESS", "sshd and ssh-agent services successfully installed"}}
	}
	return m.RunFile(path)
}

// installSSHD is Win32-OpenSSH's install-sshd.ps1 (openssh-portable
// a915f06): it needs sshd.exe beside it, rewrites openssh-events.man
// with a StreamWriter (under its own 'Stop'), repairs the ACLs of an
// existing C:\ProgramData\ssh, and registers sshd and ssh-agent
// (New-Service ... -StartupType Manual).
func (m *Machine) installSSHD(path string) error {
	dir := parent(path)
	if m.fs.file(join(dir, "sshd.exe")) == nil {
		return errors.New("sshd.exe is not present in script path")
	}
	man := join(dir, "openssh-events.man")
	if m.fs.file(man) == nil {
		return winErr("Cannot find path '%s' because it does not exist.", man)
	}
	if err := m.fs.write(man, m.fs.file(man).Data, false); err != nil {
		return winErr(`Exception calling ".ctor" with "2" argument(s): "%v"`, err)
	}
	m.repairSSHDir()
	m.Services["ssh-agent"] = &Service{Name: "ssh-agent", DisplayName: "OpenSSH Authentication Agent", Status: "Stopped", StartType: "Manual", BinPath: join(dir, "ssh-agent.exe")}
	m.Services["sshd"] = &Service{Name: "sshd", DisplayName: "OpenSSH SSH Server", Status: "Stopped", StartType: "Manual", BinPath: join(dir, "sshd.exe")}
	if m.WevtutilWarns {
		return winErr(`wevtutil.exe : **** Warning: Publisher OpenSSH resources could not be found or are not accessible to the EventLog service account (NT AUTHORITY\LOCAL SERVICE).`)
	}
	return nil
}

// startProcess is Start-Process; with -Wait -PassThru its result has the
// program's ExitCode.
func (m *Machine) startProcess(c *call) (any, error) {
	prog := c.Str("FilePath")
	var args []string
	for _, a := range asList(c.Arg("ArgumentList")) {
		args = append(args, strings.Fields(str(a))...)
	}
	m.Log = append(m.Log, strings.TrimSpace("Start-Process "+prog+" "+strings.Join(args, " ")))
	if m.fs.file(prog) == nil {
		return nil, winErr("This command cannot be run because the file %s does not exist", prog)
	}
	code := 0
	if strings.EqualFold(base(prog), "sysprep.exe") {
		if !c.Switch("Wait") {
			m.sysprepQ = args
			return nil, nil
		}
		var err error
		if code, err = m.sysprep(args); err != nil {
			return nil, err
		}
	} else {
		var err error
		code, _, err = m.program(strings.ToLower(base(prog)), prog, args, c.sc)
		if err != nil {
			return nil, err
		}
	}
	if c.Switch("PassThru") {
		return newObject("Process", "ExitCode", code), nil
	}
	return nil, nil
}

// sysprep generalizes: it caches its answer file as
// %WINDIR%\Panther\unattend.xml, which the clones' Setup reads, and with
// /shutdown powers off. A failure writes Sysprep's setuperr.log.
func (m *Machine) sysprep(args []string) (int, error) {
	var unattend string
	shutdown := false
	for _, a := range args {
		switch {
		case strings.HasPrefix(strings.ToLower(a), "/unattend:"):
			unattend = a[len("/unattend:"):]
		case strings.EqualFold(a, "/shutdown"):
			shutdown = true
		}
	}
	m.Log = append(m.Log, "sysprep "+strings.Join(args, " "))
	log := `C:\Windows\System32\Sysprep\Panther\setuperr.log`
	m.fs.mkdirAll(parent(log))
	if m.SysprepFails || (unattend != "" && m.fs.file(unattend) == nil) {
		m.WriteFile(log, []byte("Error [0x0f0073] SYSPRP RunExternalDlls:An error occurred while running registry sysprep DLLs, halting sysprep execution. dwRet = 0x3cf2\r\n"))
		return max(m.SysprepExit, 1), nil
	}
	m.Registry[key(setupState)]["ImageState"] = "IMAGE_STATE_GENERALIZE_RESEAL_TO_OOBE"
	if unattend != "" {
		m.WriteFile(`C:\Windows\Panther\unattend.xml`, m.fs.file(unattend).Data)
	}
	if m.SysprepCachesDisc {
		for _, letter := range m.discs() {
			if f := m.fs.file(letter + `:\Autounattend.xml`); f != nil {
				m.WriteFile(`C:\Windows\Panther\unattend.xml`, f.Data)
				break
			}
		}
	}
	m.Generalized = true
	if shutdown {
		return m.SysprepExit, m.halt("poweroff")
	}
	return m.SysprepExit, nil
}

const setupState = `HKLM:\SOFTWARE\Microsoft\Windows\CurrentVersion\Setup\State`
