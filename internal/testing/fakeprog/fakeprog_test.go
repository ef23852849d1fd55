package fakeprog

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAnswer: the first exchange that matches, holds and has answers
// left answers; flags, bound words and Unused follow.
func TestAnswer(t *testing.T) {
	tr, err := Parse("t.txt", []byte(`# Comments and blank lines are skipped.

# first
$ list {port}
@ set listed
< r/one
$* list {port}
@ when listed
% "Get-VM" "-Name 'a'"
! {"message":"no"}
2> "a\r\nb"
%? "never"
@ times 2; crash
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Exchanges) != 4 || tr.Exchanges[0].Name != "first" || tr.Exchanges[1].Name != "t.txt:7" ||
		!slices.Equal(tr.Exchanges[2].Script, []string{"Get-VM", "-Name 'a'"}) || tr.Exchanges[2].Stderr != "a\r\nb" ||
		tr.Exchanges[3].Times != 2 || !tr.Exchanges[3].Optional || !tr.Exchanges[3].Crash {
		t.Fatalf("parsed %+v", tr.Exchanges)
	}
	var st State
	for i, c := range []struct {
		req  Request
		want string
	}{
		{Request{Args: []string{"list", "80"}}, "first"},
		{Request{Args: []string{"list", "80"}}, "t.txt:7"},
		{Request{Args: []string{"list", "81"}}, ""}, // {port} is bound to 80
		{Request{Args: []string{"list", "80"}}, "t.txt:7"},
		{Request{Script: "x = Get-VM -Name 'b'"}, ""},
	} {
		e, ok := tr.Answer(&st, c.req, nil)
		if got := ""; ok != (c.want != "") || (ok && e.Name != c.want) {
			if ok {
				got = e.Name
			}
			t.Errorf("request %d answered by %q, want %q", i, got, c.want)
		}
	}
	if u := tr.Unused(&st); len(u) != 1 || !strings.HasPrefix(u[0], "t.txt:9: a script holding") {
		t.Errorf("unused: %q", u)
	}
	for _, bad := range []string{"< r/one\n", "$ a\n@ frob x\n", "% unquoted\n", "$ a\n! {\n", "$ 'open\n", "frob\n"} {
		if _, err := Parse("bad.txt", []byte(bad)); err == nil {
			t.Errorf("Parse took %q", bad)
		}
	}
}

// TestProgram: the built program answers a call in the reply's encoding
// with its exit status, and a call no exchange expects with the refusal,
// on the fake's record.
func TestProgram(t *testing.T) {
	replies := t.TempDir()
	if err := os.WriteFile(filepath.Join(replies, "r.txt"), []byte("# Source: this test.\n# Newlines: crlf\n== hi ==\nhi {who}\n--- stderr\nwarned\n--- exit 3\n--- utf-16le\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := Parse("t.txt", []byte("$ greet {who}\n< r/hi\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := New(t, Config{Program: "tool.exe", Transcript: tr, Replies: replies,
		Refusal: Reply{Stdout: "no: {why}\n", Exit: 5}})
	var out, errb bytes.Buffer
	cmd := exec.Command("tool.exe", "greet", "you")
	cmd.Stdin = strings.NewReader("input")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("exit %v", err)
	}
	if want := (Reply{UTF16: true}).Encode("hi you\r\n"); !bytes.Equal(out.Bytes(), want) {
		t.Errorf("stdout %q, want %q", out.Bytes(), want)
	}
	if want := (Reply{UTF16: true}).Encode("warned\r\n"); !bytes.Equal(errb.Bytes(), want) {
		t.Errorf("stderr %q, want %q", errb.Bytes(), want)
	}
	out.Reset()
	cmd = exec.Command("tool.exe", "part")
	cmd.Stdout = &out
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != 5 || !strings.HasPrefix(out.String(), "no: no exchange of the transcript expects this call") {
		t.Errorf("an unexpected call: %v %q", err, out.String())
	}
	if c := f.Calls(); len(c) != 2 || !slices.Equal(c[1], []string{"part"}) || string(f.Input(0)) != "input" {
		t.Errorf("calls %q, input %q", c, f.Input(0))
	}
	if u := f.Unexpected(); !strings.Contains(u, `["part"]`) || f.Unused() != nil || !slices.Equal(f.Answered(), []string{"t.txt:1"}) {
		t.Errorf("record: unexpected %q, unused %q, answered %q", u, f.Unused(), f.Answered())
	}
}

// TestProgramCallCrashAndErrorRecord: a program called once that crashes
// dies in the middle of its answer (half its stdout, exit status 1), and
// an error record, which only a session can answer with, refuses the
// call instead of answering it with nothing.
func TestProgramCallCrashAndErrorRecord(t *testing.T) {
	replies := t.TempDir()
	if err := os.WriteFile(filepath.Join(replies, "r.txt"), []byte("# Source: this test.\n== long ==\n0123456789abcdef\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := Parse("t.txt", []byte("$ die\n@ crash\n< r/long\n\n$ rec\n! {\"Exception\":\"x\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := New(t, Config{Program: "tool", Transcript: tr, Replies: replies, Refusal: Reply{Stdout: "no: {why}\n", Exit: 5}})
	out, err := exec.Command("tool", "die").Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || len(out) == 0 || !strings.HasPrefix("0123456789abcdef\n", string(out)) || len(out) >= len("0123456789abcdef\n") {
		t.Errorf("a crash: %v, stdout %q", err, out)
	}
	out, err = exec.Command("tool", "rec").Output()
	if !errors.As(err, &ee) || ee.ExitCode() != 5 || !strings.Contains(string(out), "an error record (!) answers only a session") {
		t.Errorf("an error record to a call: %v, stdout %q", err, out)
	}
	if u := f.Unexpected(); !strings.Contains(u, `["rec"]`) {
		t.Errorf("unexpected: %q", u)
	}
}

// TestExpand: a ${VAR} is the test's value; the path that goes on after
// one is written with the host's separator up to a space or a quote, and
// nothing else changes (an unknown ${VAR}, a "/" not after a variable).
func TestExpand(t *testing.T) {
	vars := map[string]string{"DATA": `C:\Users\me\data`, "N": "demo"}
	for _, c := range []struct{ in, slash, back string }{
		{"--basefolder ${DATA}/clusters/${N}/x --groups /hwk/demo",
			`--basefolder C:\Users\me\data/clusters/demo/x --groups /hwk/demo`,
			`--basefolder C:\Users\me\data\clusters\demo\x --groups /hwk/demo`},
		{`CfgFile="${DATA}/a/{e2a9-5b03}.vbox"` + "\n" + `x="/y"`,
			`CfgFile="C:\Users\me\data/a/{e2a9-5b03}.vbox"` + "\n" + `x="/y"`,
			`CfgFile="C:\Users\me\data\a\{e2a9-5b03}.vbox"` + "\n" + `x="/y"`},
		{"${DATA} ${OTHER}/a ${N}-cp", `C:\Users\me\data ${OTHER}/a demo-cp`, `C:\Users\me\data ${OTHER}/a demo-cp`},
	} {
		if got := expand(c.in, vars, '/'); got != c.slash {
			t.Errorf("expand(%q) with /: %q, want %q", c.in, got, c.slash)
		}
		if got := expand(c.in, vars, '\\'); got != c.back {
			t.Errorf("expand(%q) with \\: %q, want %q", c.in, got, c.back)
		}
	}
}

// TestRepliesLiteralHash: "\#" starts a reply line with # (Windows
// PowerShell's "#< CLIXML"); "#" alone is a comment.
func TestRepliesLiteralHash(t *testing.T) {
	dir := t.TempDir()
	text := "# Source: a test\n# Newlines: crlf\n== err ==\n# a note\n--- stderr\n\\#< CLIXML\n<Objs/>\n--- exit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "ps.txt"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, err := LoadReplies(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r := rs["ps/err"]; r.Stderr != "#< CLIXML\r\n<Objs/>\r\n" || r.Stdout != "" || r.Exit != 1 {
		t.Errorf("reply %+v", r)
	}
}
