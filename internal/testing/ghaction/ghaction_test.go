package ghaction

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestFileCommands: values in both of the runner's forms, a heredoc with
// blank lines and "=" in it, and lines the runner refuses.
func TestFileCommands(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out")
	os.WriteFile(p, []byte("a=1\nb=x=y\n\nc<<EOF_1\nline one\n\nk=v\nEOF_1\nd=\n"), 0o644)
	got, err := readFileCommand(p)
	want := map[string]string{"a": "1", "b": "x=y", "c": "line one\n\nk=v", "d": ""}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"=nameless\n", "just words\n", "c<<EOF\nno end\n"} {
		os.WriteFile(p, []byte(bad), 0o644)
		if _, err := readFileCommand(p); err == nil {
			t.Errorf("%q was taken", bad)
		}
	}
}

// TestSteps runs a small action: inputs with their defaults, the token,
// outputs, state carried from main to post, and an exit status.
func TestSteps(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("HWK_REQUIRE_NODE") == "1" {
			t.Fatal("HWK_REQUIRE_NODE=1 but there is no node (Debian: nodejs)")
		}
		t.Skip("no Node.js: the actions run on it")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "action.yml"), []byte(`name: t
description: a test
inputs:
  who:
    default: world
  dry-run:
    default: "false"
  token:
    default: ${{ github.token }}
runs:
  using: node24
  main: main.js
  post: post.js
`), 0o644)
	os.WriteFile(filepath.Join(dir, "main.js"), []byte(`const fs = require('fs');
const e = process.env;
fs.appendFileSync(e.GITHUB_OUTPUT, 'greeting<<X\nhello ' + e.INPUT_WHO + '\nX\n');
fs.appendFileSync(e.GITHUB_STATE, 'dry=' + e['INPUT_DRY-RUN'] + '\n');
fs.appendFileSync(e.GITHUB_PATH, '/opt/t/bin\n');
console.log('token ' + e.INPUT_TOKEN + ' in ' + process.cwd());
`), 0o644)
	os.WriteFile(filepath.Join(dir, "post.js"), []byte(`console.log('state ' + process.env.STATE_dry); process.exitCode = 3;`), 0o644)
	j, err := NewJob(dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	j.Token = "tok"
	if _, err := j.Main(context.Background(), map[string]string{"whom": "x"}); err == nil || !strings.Contains(err.Error(), `unexpected input "whom"`) {
		t.Errorf("an undeclared input: %v", err)
	}
	m, err := j.Main(context.Background(), map[string]string{"dry-run": "true"})
	if err != nil || m.Exit != 0 || m.Outputs["greeting"] != "hello world" || !reflect.DeepEqual(m.Path, []string{"/opt/t/bin"}) ||
		!strings.Contains(m.Output, "token tok in "+j.Workspace) {
		t.Errorf("main: %v %+v", err, m)
	}
	p, err := j.Post(context.Background(), nil)
	if err != nil || p.Exit != 3 || strings.TrimSpace(p.Output) != "state true" {
		t.Errorf("post: %v %+v", err, p)
	}
}
