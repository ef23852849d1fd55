package pssim

import (
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/powershell"
	"github.com/hwk-dev/hwk/pkg/node"
)

// sshNode is a Server 2022 whose sshd's DefaultShell is Windows
// PowerShell, as node-images/windows/provision.ps1 ("PowerShell as the
// login shell") sets it, DefaultShellCommandOption left unset.
func sshNode() *Machine {
	m := NewServer2022()
	m.Registry[key(openSSHKey)] = map[string]any{"DefaultShell": `C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe`}
	return m
}

// scriptLine is the command line hwk's SSH transport sends for script
// (pkg/node: ScriptArgs, then Quote in ssh.go's open).
func scriptLine(script string) string {
	return node.Quote(node.PowerShell, node.ScriptArgs(node.PowerShell, script)...)
}

func TestSSHExecScriptSucceeds(t *testing.T) {
	m := sshNode()
	out, errs, code := m.SSHExec(scriptLine("$n = 2\n\"n=$n\"\nMicrosoft.PowerShell.Utility\\Write-Output 'done'\n"))
	if code != 0 || errs != "" || out != "n=2\r\ndone\r\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// What sshd started: the lower-cased, quoted shell, -c, the line in
	// double quotes (w32-doexec.c, misc.c).
	want := `sshd spawns: "c:\windows\system32\windowspowershell\v1.0\powershell.exe" -c "$global:LASTEXITCODE = $null; & 'powershell.exe' '-NoLogo' `
	if !slices.ContainsFunc(m.Log, func(l string) bool { return strings.HasPrefix(l, want) }) {
		t.Errorf("no %q in the log:\n%s", want, strings.Join(m.Log, "\n"))
	}
}

func TestSSHExecThrowIsCLIXML(t *testing.T) {
	m := sshNode()
	out, errs, code := m.SSHExec(scriptLine("'before'\nif ($true) {\n    throw 'the disk <C:> is full & stays so'\n}\n'after'\n"))
	if code != 1 || out != "before\r\n" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	for _, want := range []string{
		"#< CLIXML\r\n<Objs Version=\"1.1.0.1\" xmlns=\"http://schemas.microsoft.com/powershell/2004/04\">",
		`<S S="Error">the disk &lt;C:&gt; is full &amp; stays so_x000D__x000A_</S>`,
		`<S S="Error">At line:3 char:5_x000D__x000A_</S>`,
		`<S S="Error">+     throw 'the disk &lt;C:&gt; is full &amp; stays so'_x000D__x000A_</S>`,
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if !strings.HasSuffix(errs, "</Objs>") {
		t.Errorf("stderr does not end with the document: %q", errs)
	}
	if got := powershell.ErrorText(errs); got != "the disk <C:> is full & stays so" {
		t.Errorf("ErrorText = %q", got)
	}
}

// TestSSHExecExitStatus: the nested powershell.exe exits 3, but the
// outer one (sshd's DefaultShell, running -Command) maps the $? of its
// last statement to 0 or 1, so a bare command line gives the SSH client
// 1 (ConsoleHost DoRunspaceLoop; PowerShell/PowerShell#13501); node.Quote's
// line ends with an exit that keeps the 3.
func TestSSHExecExitStatus(t *testing.T) {
	m := sshNode()
	line := scriptLine("'x'\nexit 3\n")
	bare, _, _ := strings.Cut(line, "; $ok = $?")
	bare = strings.TrimPrefix(bare, "$global:LASTEXITCODE = $null; ")
	if _, errs, code := m.SSHExec(bare); code != 1 || errs != "" {
		t.Errorf("exit 3 over SSH, bare: status %d, stderr %q; want 1", code, errs)
	}
	if _, errs, code := m.SSHExec(line); code != 3 || errs != "" {
		t.Errorf("exit 3 over SSH, node.Quote's line: status %d, stderr %q; want 3", code, errs)
	}
	if _, _, code := m.SSHExec(scriptLine("exit 0")); code != 0 {
		t.Errorf("exit 0 over SSH: status %d", code)
	}
	// Run in the outer shell itself, exit keeps its code.
	if _, _, code := m.SSHExec("exit 3"); code != 3 {
		t.Errorf("exit 3 as the command line: status %d", code)
	}
	// The nested one alone: exit's code, 1 for a throw.
	for script, want := range map[string]int{"exit 3": 3, "throw 'x'": 1, "'ok'": 0} {
		var errb strings.Builder
		_, code, loud := m.powershellExe(powershell.Args(script), &errb)
		if code != want || loud != "" {
			t.Errorf("powershell.exe -EncodedCommand %q: exit %d (%s), want %d", script, code, loud, want)
		}
	}
}

// TestSSHExecQuoting: node.Quote's words survive sshd's command line and
// the C runtime's split: a single quote (doubled in the word), double
// quotes (which sshd writes \"), a trailing backslash.
func TestSSHExecQuoting(t *testing.T) {
	m := sshNode()
	for _, arg := range []string{"it's", `say "hi" now`, `C:\dir with space\`, `a  b`} {
		out, errs, code := m.SSHExec(node.Quote(node.PowerShell, `Microsoft.PowerShell.Utility\Write-Output`, arg))
		if code != 0 || errs != "" || out != arg+"\r\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", arg, code, out, errs)
		}
	}
	// To a nested powershell.exe, Windows PowerShell 5.1 passes a word
	// with a blank in double quotes and escapes nothing: single quotes
	// survive, a double-quoted word inside the argument does not.
	out, _, code := m.SSHExec(node.Quote(node.PowerShell, "powershell.exe", "-NoProfile", "-Command", "Microsoft.PowerShell.Utility\\Write-Output 'it''s'"))
	if code != 0 || out != "it's\r\n" {
		t.Errorf("nested -Command with single quotes: exit %d, stdout %q", code, out)
	}
	out, _, _ = m.SSHExec(node.Quote(node.PowerShell, "powershell.exe", "-NoProfile", "-Command", `Microsoft.PowerShell.Utility\Write-Output "a  b"`))
	if out == "a  b\r\n" {
		t.Errorf("5.1's native quoting kept %q whole; it must not", out)
	}
}

func TestSSHExecUnknownFailsLoudly(t *testing.T) {
	m := sshNode()
	for _, line := range []string{
		node.Quote(node.PowerShell, `nosuch.exe`, "x"),
		scriptLine("Contoso\\Get-Thing"),
		node.Quote(node.PowerShell, "powershell.exe", "-Sta", "-Command", "'x'"),
	} {
		_, errs, code := m.SSHExec(line)
		if code != SSHUnmodelled || !strings.HasPrefix(errs, "pssim") {
			t.Errorf("%s: exit %d, stderr %q; want %d and a pssim message", line, code, errs, SSHUnmodelled)
		}
	}
	// No DefaultShell: sshd runs cmd.exe, which the model does not.
	if _, errs, code := NewServer2022().SSHExec(scriptLine("'x'")); code != SSHUnmodelled || !strings.Contains(errs, "cmd.exe") {
		t.Errorf("cmd.exe as the shell: exit %d, stderr %q", code, errs)
	}
}

// TestSpawnCommandLine: build_commandline_string's quoting, split again
// by the C runtime's rules, gives the argument back, except for its
// known gap: a trailing backslash before the quote it adds.
func TestSpawnCommandLine(t *testing.T) {
	for _, a := range []string{`& 'x' 'it''s'`, `say "hi"`, `a\\"b c`, `C:\a b\c`, `'single start' x`} {
		argv := commandLineToArgv(spawnCommandLine(`"c:\p.exe"`, []string{"-c", a}))
		want := []string{`c:\p.exe`, "-c", a}
		if a[0] == '\'' {
			// Not quoted: the C runtime splits it.
			want = append([]string{`c:\p.exe`, "-c"}, strings.Fields(a)...)
		}
		if !slices.Equal(argv, want) {
			t.Errorf("%q: argv %q, want %q", a, argv, want)
		}
	}
	if argv := commandLineToArgv(spawnCommandLine(`"c:\p.exe"`, []string{`C:\a b\`})); slices.Equal(argv, []string{`c:\p.exe`, `C:\a b\`}) {
		t.Errorf("a trailing backslash survived: %q", argv)
	}
}
