package pssim

import (
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"strings"
	"unicode/utf16"
)

// SSHUnmodelled is SSHExec's exit status for a command line the model
// cannot run (its stderr then starts "pssim: "): 255, the status an ssh
// client gives for a failure of its own, so no test mistakes it for a
// script's.
const SSHUnmodelled = 255

// openSSHKey is where Win32-OpenSSH's sshd reads its default shell
// (openssh-portable contrib/win32/win32compat/pwd.c, set_defaultshell:
// HKLM\SOFTWARE\OpenSSH, values DefaultShell and DefaultShellCommandOption).
const openSSHKey = `HKLM:\SOFTWARE\OpenSSH`

// sshStderr is the root-scope variable of a run started by SSHExec that
// holds the session's stderr, which a child powershell.exe inherits (a
// space in its name: no script names it by accident).
const sshStderr = "pssim ssh stderr"

// SSHExec is an SSH "exec" request (no terminal) for command line command,
// as Win32-OpenSSH's sshd serves it with the machine's registry: it reads
// DefaultShell (cmd.exe without one) and DefaultShellCommandOption ("-c"
// for any shell but cmd.exe), builds the shell's process command line and
// starts it with stdin, stdout and stderr pipes (openssh-portable a915f06,
// contrib/win32/win32compat/w32-doexec.c do_exec_windows). The shell must
// be powershell.exe, which runs the line with -Command's rules; a nested
// powershell.exe it starts inherits the pipes. The model neither checks
// that sshd runs (see SSHLogin) nor that the programs' files exist.
func (m *Machine) SSHExec(command string) (stdout, stderr string, exit int) {
	m.Log = append(m.Log, "sshd exec: "+command)
	shell, option := `C:\Windows\System32\cmd.exe`, ""
	reg := m.Registry[key(openSSHKey)]
	if s, _ := reg["DefaultShell"].(string); s != "" {
		shell = s
		option, _ = reg["DefaultShellCommandOption"].(string)
	}
	// pwd.c lower-cases the path; do_exec_windows quotes it and picks the
	// option by shell type: "/c" for ...system32\cmd, "-c" for the rest.
	shell = strings.ToLower(strings.ReplaceAll(shell, "/", `\`))
	if option == "" {
		option = "-c"
		if strings.Contains(shell, `system32\cmd`) {
			option = "/c"
		}
	}
	if !strings.Contains(shell, "powershell") {
		return "", fmt.Sprintf("pssim: the model runs SSH commands only under a DefaultShell of powershell.exe, not %s", shell), SSHUnmodelled
	}
	// build_exec_command rewrites commands starting with sftp-server, scp
	// or internal-sftp (w32-doexec.c); hwk sends none, the model runs none.
	for _, p := range []string{"internal-sftp", "sftp-server", "scp"} {
		if len(command) >= len(p) && strings.EqualFold(command[:len(p)], p) {
			return "", "pssim: the model does not run " + p + " over an exec request", SSHUnmodelled
		}
	}
	if command == "" {
		return "", "pssim: an exec request with no command (a shell request) is not modelled", SSHUnmodelled
	}
	// SH_PS: posix_spawn with argv {"\"shell\"", option, command}, whose
	// command line build_commandline_string makes (misc.c).
	line := spawnCommandLine(`"`+shell+`"`, []string{option, command})
	argv := commandLineToArgv(line)
	m.Log = append(m.Log, "sshd spawns: "+line)
	var errb strings.Builder
	out, code, loud := m.powershellExe(argv[1:], &errb)
	if loud != "" {
		return strings.Join(out, "\r\n"), loud, SSHUnmodelled
	}
	so := ""
	if len(out) > 0 {
		so = strings.Join(out, "\r\n") + "\r\n"
	}
	return so, errb.String(), code
}

// spawnCommandLine is openssh-portable's build_commandline_string (misc.c)
// for a cmd that starts with '"': cmd as it is, then each argument after a
// space, in double quotes when it holds a space and does not start with a
// single quote; a '"' becomes \" and a run of backslashes before one is
// doubled (but not one before the closing quote it adds).
func spawnCommandLine(cmd string, args []string) string {
	var b strings.Builder
	b.WriteString(cmd)
	for _, a := range args {
		b.WriteByte(' ')
		quote := a != "" && a[0] != '\'' && strings.Contains(a, " ")
		if quote {
			b.WriteByte('"')
		}
		for i := 0; i < len(a); i++ {
			switch a[i] {
			case '\\':
				n := 0
				for i+n < len(a) && a[i+n] == '\\' {
					n++
				}
				if i+n < len(a) && a[i+n] == '"' {
					n *= 2
				}
				b.WriteString(strings.Repeat(`\`, n))
				for i+1 < len(a) && a[i+1] == '\\' {
					i++
				}
			case '"':
				b.WriteString(`\"`)
			default:
				b.WriteByte(a[i])
			}
		}
		if quote {
			b.WriteByte('"')
		}
	}
	return b.String()
}

// commandLineToArgv splits a process command line as the Microsoft C
// runtime does for wmain, which powershell.exe is (learn.microsoft.com,
// "Parsing C command-line arguments"): the program name up to the next
// '"' or blank; then 2n backslashes and '"' are n backslashes and a quote
// toggle, 2n+1 and '"' n backslashes and a literal '"', "" inside quotes a
// literal '"', other backslashes literal, blanks outside quotes separators.
func commandLineToArgv(s string) []string {
	var argv []string
	i := 0
	if strings.HasPrefix(s, `"`) {
		end := strings.IndexByte(s[1:], '"')
		if end < 0 {
			return []string{s[1:]}
		}
		argv, i = append(argv, s[1:1+end]), end+2
	} else {
		end := strings.IndexAny(s, " \t")
		if end < 0 {
			return []string{s}
		}
		argv, i = append(argv, s[:end]), end
	}
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			return argv
		}
		var b strings.Builder
		in := false
		for i < len(s) && (in || (s[i] != ' ' && s[i] != '\t')) {
			switch c := s[i]; {
			case c == '\\':
				n := 0
				for i < len(s) && s[i] == '\\' {
					n, i = n+1, i+1
				}
				if i < len(s) && s[i] == '"' {
					b.WriteString(strings.Repeat(`\`, n/2))
					if n%2 == 1 {
						b.WriteByte('"')
						i++
					}
					continue
				}
				b.WriteString(strings.Repeat(`\`, n))
			case c == '"':
				if in && i+1 < len(s) && s[i+1] == '"' {
					b.WriteByte('"')
					i += 2
					continue
				}
				in = !in
				i++
			default:
				b.WriteByte(c)
				i++
			}
		}
		argv = append(argv, b.String())
	}
}

// nativeCommandLine is the command line Windows PowerShell 5.1 gives a
// program it starts: the arguments joined by spaces, each in double quotes
// when it has a blank outside quotes, nothing escaped, an empty one
// dropped (NativeCommandParameterBinder.cs, NeedQuotes, before 7.3's
// $PSNativeCommandArgumentPassing).
func nativeCommandLine(prog string, args []string) string {
	parts := []string{`"` + prog + `"`}
	for _, a := range args {
		if a == "" {
			continue
		}
		quotes, needs, afterBackslash := 0, false, false
		for _, c := range a {
			if c == '"' && !afterBackslash {
				quotes++
			} else if (c == ' ' || c == '\t') && quotes%2 == 0 {
				needs = true
			}
			afterBackslash = c == '\\'
		}
		if needs {
			a = `"` + a + `"`
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// matchSwitch is CommandLineParameterParser's MatchSwitch: key (lower
// case, its '-', '--' or '/' gone) is a prefix of name at least as long as
// short.
func matchSwitch(key, name, short string) bool {
	return strings.HasPrefix(name, key) && len(key) >= len(short)
}

// powershellExe runs powershell.exe with args (its argv after the program)
// as Windows PowerShell 5.1's ConsoleHost does, with stdout and stderr
// redirected (pipes): the output lines, the exit status, and loud, a
// message, when the model cannot run it. Errors go to stderr, as CLIXML
// for an -EncodedCommand (ConsoleHost.ErrorFormat is XML when the host is
// not interactive, stderr is redirected and the command was encoded:
// PowerShell/PowerShell src/Microsoft.PowerShell.ConsoleHost/host/msh/
// ConsoleHost.cs, at its 2016 import), as text otherwise.
func (m *Machine) powershellExe(args []string, stderr *strings.Builder) (out []string, exit int, loud string) {
	var script string
	encoded, have := false, false
	// CommandLineParameterParser.ParseHelper (ConsoleHost, 2016 import):
	// a switch starts with '-', '--' or '/'; the first word that is no
	// switch starts the command; -Command takes every word after it,
	// joined by single spaces.
	for i := 0; i < len(args) && !have; i++ {
		k := strings.ToLower(strings.TrimSpace(args[i]))
		if k == "" {
			continue
		}
		if k[0] != '-' && k[0] != '/' {
			script, have = strings.Join(args[i:], " "), true
			break
		}
		k = strings.TrimPrefix(k[1:], "-")
		switch {
		case matchSwitch(k, "nologo", "nol"), matchSwitch(k, "noprofile", "nop"), matchSwitch(k, "noninteractive", "noni"):
		case matchSwitch(k, "executionpolicy", "ex"), matchSwitch(k, "ep", "ep"):
			i++
		case matchSwitch(k, "encodedcommand", "e"), matchSwitch(k, "ec", "e"):
			if i+1 >= len(args) {
				return nil, 0, "pssim: powershell.exe -EncodedCommand without its argument"
			}
			s, err := decodeUTF16Base64(args[i+1])
			if err != nil {
				// 5.1 writes "Cannot process the command because the value
				// specified with -EncodedCommand is not properly encoded."
				// and exits; the model fails loudly instead.
				return nil, 0, fmt.Sprintf("pssim: powershell.exe -EncodedCommand %q: %v", args[i+1], err)
			}
			script, encoded, have = s, true, true
		case matchSwitch(k, "command", "c"):
			if i+1 < len(args) && args[i+1] == "-" {
				return nil, 0, "pssim: powershell.exe -Command - (the command from stdin) is not modelled"
			}
			script, have = strings.Join(args[i+1:], " "), true
		default:
			return nil, 0, fmt.Sprintf("pssim: the model does not know powershell.exe's %s (in %q)", args[i], args)
		}
	}
	if !have {
		return nil, 0, fmt.Sprintf("pssim: powershell.exe %q runs no command; an interactive shell is not modelled", args)
	}
	sc := newScope(nil)
	sc.set(sshStderr, stderr)
	run := m.runCommandLine(script, sc)
	if run.loud != "" {
		return run.out, 0, run.loud
	}
	if encoded {
		stderr.WriteString(clixml(run.warnings, run.errors))
	} else {
		for _, e := range run.errors {
			stderr.WriteString(strings.Join(e, "\r\n") + "\r\n")
		}
	}
	return run.out, run.exit, ""
}

// commandRun is how a -Command run went.
type commandRun struct {
	out      []string
	exit     int
	warnings []string
	// errors are the error records written, each as its lines.
	errors [][]string
	loud   string
}

// runCommandLine runs script as powershell.exe -Command (or
// -EncodedCommand) does. Its exit status is exit's argument if the script
// ran exit; else 0 if $? holds after its last statement and 1 if not
// (ConsoleHost.DoRunspaceLoop: SetShouldExit's code, or $global:? mapped
// to 0/1), so a program's or nested powershell's status other than 0 comes
// out as 1 (PowerShell/PowerShell#13501; about_PowerShell_exe for 5.1
// advises "exit $LASTEXITCODE"). The model's $? after the last top-level
// statement is false when it failed, wrote an error, or was a program that
// set $LASTEXITCODE non-zero.
func (m *Machine) runCommandLine(script string, sc *scope) commandRun {
	in := &interp{m: m, funcs: map[string]*function{}, script: "<command>"}
	sc.script = "<command>"
	sc.set("ErrorActionPreference", "Continue")
	sc.set("LASTEXITCODE", 0)
	var r commandRun
	body, err := parse(script)
	if err != nil {
		r.loud = fmt.Sprintf("pssim cannot read the command %q: %v", script, err)
		return r
	}
	errs, warns := len(m.Errors), len(m.Warnings)
	ok := true
	for _, s := range body {
		// $LASTEXITCODE lives on from statement to statement: a
		// program's statement sets it.
		before := len(m.Errors)
		o, err := in.runStmt(s, sc)
		for _, v := range o {
			r.out = append(r.out, str(v))
		}
		var ex exitSignal
		var halt haltSignal
		var ret returnSignal
		switch {
		case err == nil:
			// A program's $? is its exit status alone; what it wrote
			// to an inherited stderr is no error record.
			code, _ := sc.get("LASTEXITCODE")
			if isNativeStatement(s) {
				ok = toInt(code) == 0
			} else {
				ok = len(m.Errors) == before
			}
			sc.set("?", ok)
			continue
		case errors.As(err, &ret):
		case errors.As(err, &ex):
			r.exit = ex.code
			r.finish(m, errs, warns)
			return r
		case errors.As(err, &halt):
		case strings.Contains(err.Error(), "pssim"):
			r.loud = err.Error()
			return r
		default:
			r.errors = append(r.errors, errorLines(err, script))
			ok = false
		}
		break
	}
	r.finish(m, errs, warns)
	if !ok {
		r.exit = 1
	}
	return r
}

// finish adds the non-terminating errors and warnings the run wrote, in
// front of its terminating error (the model keeps no order between them).
func (r *commandRun) finish(m *Machine, errs, warns int) {
	var nt [][]string
	for _, e := range m.Errors[errs:] {
		nt = append(nt, append(strings.Split(strings.ReplaceAll(e, "\r\n", "\n"), "\n"), " "))
	}
	r.errors = append(nt, r.errors...)
	r.warnings = append(r.warnings, m.Warnings[warns:]...)
}

// isNativeStatement reports whether s is a plain statement running a
// program (& 'x.exe' ..., x.exe ...).
func isNativeStatement(s stmt) bool {
	if s.kind != "" || assignRE.MatchString(s.text) || !isCommand(s.text) {
		return false
	}
	toks := tokens(s.text)
	if len(toks) == 0 {
		return false
	}
	name := toks[0].text
	if (name == "&" || name == ".") && len(toks) > 1 {
		name = strings.Trim(toks[1].text, `'"`)
	}
	return native(name)
}

// errorLines are a terminating error's record as 5.1's ConsoleHost writes
// it: the message's lines, the position, the code line with "+ " and its
// underline, CategoryInfo, FullyQualifiedErrorId and a blank line, as for
// a throw (OperationStopped, RuntimeException: PowerShell/PowerShell#5912
// and internal/powershell/testdata/throw.clixml). The model does not wrap long
// lines at the console's width, and words every error as a throw's.
func errorLines(err error, script string) []string {
	msg, line := err.Error(), 0
	var pe *PSError
	if errors.As(err, &pe) {
		msg, line = pe.Message, pe.Line
	}
	msg = strings.ReplaceAll(msg, "\r\n", "\n")
	out := strings.Split(msg, "\n")
	src := strings.Split(strings.ReplaceAll(script, "\r\n", "\n"), "\n")
	if line >= 1 && line <= len(src) {
		code := strings.TrimRight(src[line-1], " \t")
		indent := len(code) - len(strings.TrimLeft(code, " \t"))
		out = append(out, fmt.Sprintf("At line:%d char:%d", line, indent+1),
			"+ "+code, "+ "+code[:indent]+strings.Repeat("~", len(code)-indent))
	}
	flat := strings.ReplaceAll(msg, "\n", " ")
	return append(out,
		"    + CategoryInfo          : OperationStopped: ("+flat+":String) [], RuntimeException",
		"    + FullyQualifiedErrorId : "+flat,
		" ")
}

// clixml is the stderr of an -EncodedCommand run that wrote warnings and
// error records: "#< CLIXML", CRLF, then one <Objs> document on one line,
// the progress record 5.1 writes as it first loads modules, and an <S>
// per line, each line ending _x000D__x000A_; nothing when nothing was
// written (the shape of internal/powershell/testdata/throw.clixml, from
// PowerShell/PowerShell#5912 and ansible's test_powershell.py captures).
func clixml(warnings []string, records [][]string) string {
	if len(warnings) == 0 && len(records) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("#< CLIXML\r\n")
	b.WriteString(`<Objs Version="1.1.0.1" xmlns="http://schemas.microsoft.com/powershell/2004/04">`)
	b.WriteString(`<Obj S="progress" RefId="0"><TN RefId="0"><T>System.Management.Automation.PSCustomObject</T><T>System.Object</T></TN><MS><I64 N="SourceId">1</I64><PR N="Record"><AV>Preparing modules for first use.</AV><AI>0</AI><Nil /><PI>-1</PI><PC>-1</PC><T>Completed</T><SR>-1</SR><SD> </SD></PR></MS></Obj>`)
	for _, w := range warnings {
		for _, l := range strings.Split(strings.ReplaceAll(w, "\r\n", "\n"), "\n") {
			b.WriteString(`<S S="warning">` + clixmlString(l+"\r\n") + `</S>`)
		}
	}
	for _, rec := range records {
		for _, l := range rec {
			b.WriteString(`<S S="Error">` + clixmlString(l+"\r\n") + `</S>`)
		}
	}
	b.WriteString(`</Objs>`)
	return b.String()
}

// clixmlString is a string as PowerShell's serializer writes it: XML's
// entities for & < >, control characters as _xHHHH_ and the '_' of a
// literal "_x" as _x005F_ (System.Management.Automation's
// InternalSerializer, EncodeString).
func clixmlString(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r < 0x20:
			fmt.Fprintf(&b, "_x%04X_", r)
		case r == '_' && i+1 < len(s) && s[i+1] == 'x':
			b.WriteString("_x005F_")
		default:
			b.WriteString(html.EscapeString(string(r)))
		}
	}
	// EscapeString also escapes quotes, which element text keeps.
	return strings.NewReplacer("&#34;", `"`, "&#39;", "'").Replace(b.String())
}

// decodeUTF16Base64 is -EncodedCommand's argument as text: base64 of
// UTF-16LE (about_PowerShell_exe, -EncodedCommand).
func decodeUTF16Base64(s string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", err
	}
	if len(raw)%2 != 0 {
		return "", errors.New("an odd number of bytes is no UTF-16")
	}
	u := make([]uint16, len(raw)/2)
	for i := range u {
		u[i] = uint16(raw[2*i]) | uint16(raw[2*i+1])<<8
	}
	return string(utf16.Decode(u)), nil
}

// childPowerShell is a script's `& powershell.exe ... -EncodedCommand X`
// or `-Command ...`: PowerShell 5.1 hands the arguments over as one
// command line (nativeCommandLine), which the child splits again; last in
// its pipeline the child inherits the caller's stdout and stderr
// (NativeCommandProcessor.CalculateIORedirection: no redirection for a
// command whose output goes to Out-Default). Its stderr goes to the SSH
// session's when SSHExec started the run, else its lines become errors of
// the caller's (m.Errors). ok is false for arguments this does not take
// (-File: native.go runs those).
func (m *Machine) childPowerShell(args []string, sc *scope) (code int, out []any, ok bool, err error) {
	for _, a := range args {
		if k := strings.TrimLeft(strings.ToLower(a), "-/"); k != "" && len(k) < len(a) && matchSwitch(k, "file", "f") {
			return 0, nil, false, nil
		}
	}
	argv := commandLineToArgv(nativeCommandLine("powershell.exe", args))
	var errb strings.Builder
	errs, warns := len(m.Errors), len(m.Warnings)
	lines, code, loud := m.powershellExe(argv[1:], &errb)
	if loud != "" {
		return 0, nil, true, errors.New(loud)
	}
	for _, l := range lines {
		out = append(out, l)
	}
	root := sc
	for root.parent != nil {
		root = root.parent
	}
	if w, _ := root.vars[sshStderr].(*strings.Builder); w != nil {
		// The child's records are on the session's stderr already, not
		// the caller's to write again.
		m.Errors, m.Warnings = m.Errors[:errs], m.Warnings[:warns]
		w.WriteString(errb.String())
	} else if s := errb.String(); s != "" {
		m.Errors = append(m.Errors, "powershell.exe: "+s)
	}
	return code, out, true, nil
}
